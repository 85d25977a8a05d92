"""Run a spec: `python run_lab.py [spec/FILE.json [NAME]] [--mode train|dev|test]`; see --help."""
import sys

from slm_lab_like.cli import main

if __name__ == "__main__":
    sys.exit(main())
