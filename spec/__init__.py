"""The specs shipped with the lab: installed as package data of slm_lab_like.specs, so `slm-lab demo` finds them by name."""
