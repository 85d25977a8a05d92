"""SLM Lab's spec files read here: a v4 JSON or 5.x YAML spec recognised by its shape and translated to this lab's,
key by key, with a line per key saying how it was taken and a one-line refusal at the key path of what has none."""
from slm_lab_like.spec.slmlab.record import Line, Translation
from slm_lab_like.spec.slmlab.translate import recognised, translate

__all__ = ["Line", "Translation", "recognised", "translate"]
