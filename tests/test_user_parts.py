"""A spec names the user's own algorithm, memory and net as `module:Class`, as it names envs: found, checked by
`check` at the same key paths as built-in ones, and run."""
from __future__ import annotations

import pytest

from slm_lab_like.experiment.session import Session
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate
from tests import user_parts
from tests.conftest import random_spec

M = "tests.user_parts"


def test_a_user_algorithm_with_its_settings_runs() -> None:
    raw = random_spec(num=2, max_frame=100)
    raw["agent"][0]["algorithm"] = {"name": f"{M}:Constant", "action": 1}
    spec = validate(raw, "t")
    assert spec.agent[0].algorithm.config.action == 1
    result = Session(spec, seed=0).run()
    assert result.env_frames == [100]


def test_a_user_memory_and_net_under_a_builtin_algorithm() -> None:
    raw = random_spec(num=2, max_frame=300)
    raw["agent"][0] = {"name": "dqn", "algorithm": {"name": "DQN", "learning_starts": 50},
                       "memory": {"name": f"{M}:CountingReplay", "capacity": 1000},
                       "net": {"name": f"{M}:WideMLP", "hid_layers": [16]}}
    before = user_parts.CountingReplay.added
    Session(validate(raw, "t"), seed=0).run()
    assert user_parts.CountingReplay.added - before == 150  # one add per step of the 2 bodies' group


@pytest.mark.parametrize("key, part, message", [
    ("algorithm", {"name": f"{M}:Constant", "actoin": 1}, r'^agent\[0\]\.algorithm\.actoin: unknown key; did you mean '
                                                          r'"action"\?$'),
    ("algorithm", {"name": f"{M}:Constant", "action": -1}, r"^agent\[0\]\.algorithm\.action: .*>= 0"),
    ("algorithm", {"name": f"{M}:Missing"}, r'^agent\[0\]\.algorithm\.name: algorithm "tests.user_parts:Missing": '
                                            r'module "tests.user_parts" has no attribute "Missing"'),
    ("algorithm", {"name": "no_such_module:X"}, r'^agent\[0\]\.algorithm\.name: algorithm "no_such_module:X": cannot '
                                                r'import module "no_such_module"'),
    ("algorithm", {"name": f"{M}:NotAnAlgorithm"}, r'^agent\[0\]\.algorithm\.name: algorithm "tests.user_parts:'
                                                   r'NotAnAlgorithm" is not a subclass of slm_lab_like.agents.base:'
                                                   r'Algorithm$'),
    ("algorithm", {"name": f"{M}:NoConfig"}, r'^agent\[0\]\.algorithm\.name: .* declares no Config dataclass'),
    ("algorithm", {"name": "PPOO"}, r'^agent\[0\]\.algorithm\.name: unknown algorithm "PPOO"; did you mean "PPO"\?$'),
    ("net", {"name": f"{M}:CountingReplay"}, r"^agent\[0\]\.net\.name: .* is not a subclass of "
                                             r"slm_lab_like.agents.net.base:Net$"),
    ("memory", {"name": f"{M}:CountingReplay"}, r"^agent\[0\]\.memory\.name: PPO learns from OnPolicyBatch \(or a "
                                                r"subclass\); got tests.user_parts:CountingReplay"),
    ("algorithm", {"name": f"{M}:NoAct"}, r"^agent\[0\]\.algorithm\.name: NoAct does not define act$"),
    ("algorithm", {"name": f"{M}:StringSpaces"}, r"^agent\[0\]\.algorithm\.name: StringSpaces\.action_spaces is "
                                                 r"\('Discrete',\); expected a tuple of gymnasium space classes"),
])
def test_user_part_mistakes_are_one_line_at_their_key(key: str, part: dict, message: str) -> None:
    raw = random_spec()
    raw["agent"][0] = {"name": "a", "algorithm": {"name": "PPO"}, key: part}
    with pytest.raises(SpecError, match=message):
        validate(raw, "t")


def test_a_user_lab_env_runs_by_its_class_name() -> None:
    raw = random_spec(num=3, max_frame=90)
    raw["env"][0] = {"name": f"{M}:Frozen", "max_frame": 90, "kwargs": {"n": 3}}
    assert Session(validate(raw, "t"), seed=0).run().env_frames == [90]


@pytest.mark.parametrize("entry, message", [
    ({"kwargs": {"mistake": "no_frames"}}, r"^env\[0\]\.name: breaks the LabEnv contract: tests.user_parts:Frozen at "
                                           r"step 1: the clock counted 0 frames, 2 slot\(s\) acted$"),
    ({"kwargs": {"mistake": "constructor"}}, r'^env\[0\]\.name: env "tests.user_parts:Frozen": building it raised '
                                             r"KeyError: 'n' \(at user_parts.py:\d+\)$"),
    ({"kwargs": {"nn": 3}}, r'^env\[0\]\.kwargs\.nn: unknown keyword of Frozen; did you mean "n"\?$'),
    ({"kwargs": {"n": 0}}, r"^env\[0\]: n: at least 1, got 0$"),
    ({"kwargs": {"n": "3"}}, r'^env\[0\]\.kwargs: cannot build env "tests.user_parts:Frozen": TypeError: \'<\' not '
                             r"supported between instances of 'str' and 'int'$"),
    ({"name": f"{M}:NoMaxT", "kwargs": {"n": 3}}, r'^env\[0\]\.name: cannot build env "tests.user_parts:NoMaxT" as NoMaxT\(name, n_slots, '
                              r"clock, max_t, \*\*kwargs\): multiple values for argument 'n'$"),
])
def test_a_user_lab_env_that_cannot_run_is_one_line_at_check(entry: dict, message: str) -> None:
    raw = random_spec(num=2)
    raw["env"][0] = {"name": f"{M}:Frozen", "max_frame": 90, **entry}
    with pytest.raises(SpecError, match=message):
        validate(raw, "t")


@pytest.mark.parametrize("key", ["memory", "net"])
def test_a_block_an_algorithm_would_ignore_is_refused(key: str) -> None:
    raw = random_spec()
    raw["agent"][0][key] = {"name": "Replay" if key == "memory" else "MLP"}
    word = ("takes no memory; drop the memory block; Replay is for DQN, DoubleDQN and SAC" if key == "memory"
            else "builds no net; drop the net block")
    with pytest.raises(SpecError, match=rf"^agent\[0\]\.{key}\.name: Random {word}$"):
        validate(raw, "t")


def test_an_algorithm_refuses_the_signatures_it_cannot_run_on_at_check() -> None:
    raw = random_spec(n_envs=2)
    raw["env"][1]["name"] = "Acrobot-v1"
    raw["agent"][0]["algorithm"]["name"] = f"{M}:OneShape"
    with pytest.raises(SpecError, match=r"^agent\[0\]\.algorithm\.name: OneShape takes one observation shape; got "
                                        r"\[\(4,\), \(6,\)\]$"):
        validate(raw, "t")
    raw["env"][1]["name"] = "CartPole-v1"
    validate(raw, "t")


@pytest.mark.parametrize("fault, message", [
    ("init", r'^session 0: agent\[0\] "a" build failed: RuntimeError: no GPU budget left \(traceback in .*error\.log\)$'),
    ("state", r'^session 0: agent\[0\] "a" state_dict failed: ValueError: Broken\.state_dict\(\) holds what a '
              r"checkpoint cannot load back .*Unsupported global: GLOBAL numpy"),
])
def test_a_user_algorithm_that_fails_outside_the_loop_ends_its_session_in_one_line(tmp_path, fault: str,
                                                                                   message: str) -> None:
    from slm_lab_like.experiment.failures import SessionFailed

    raw = random_spec(max_frame=50)
    raw["agent"][0] = {"name": "a", "algorithm": {"name": f"{M}:Broken", "fault": fault}}
    with pytest.raises(SessionFailed, match=message) as failed:
        Session(validate(raw, "t"), seed=0, out_dir=tmp_path).run()
    assert "\n" not in str(failed.value) and (tmp_path / "error.log").exists()


def test_a_run_whose_module_is_not_on_the_path_is_named_with_how_to_go_on(tmp_path, capsys, monkeypatch) -> None:
    """eval (or resume) from a directory where the run's own module does not import: one line naming the run's
    spec.json, with the hint to run from where it ran."""
    import json
    import sys

    from slm_lab_like.cli import main

    (tmp_path / "mine.py").write_text("from tests.user_parts import Constant as Mine\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    raw = random_spec(max_frame=50)
    raw["agent"][0]["algorithm"] = {"name": "mine:Mine"}
    (tmp_path / "s.json").write_text(json.dumps(raw))
    assert main(["s.json", "--out", str(tmp_path / "out"), "-q"]) == 0
    monkeypatch.syspath_prepend(str(tmp_path / "out"))  # not where mine.py is
    sys.path.remove(str(tmp_path))
    sys.modules.pop("mine", None)
    monkeypatch.chdir(tmp_path / "out")
    capsys.readouterr()
    (trial,) = (tmp_path / "out").iterdir()
    assert main(["eval", str(trial), "--episodes", "1", "-q"]) == 2
    err = capsys.readouterr().err
    assert err == (f'error: {trial / "spec.json"}: agent[0].algorithm.name: algorithm "mine:Mine": cannot import module '
                   "\"mine\": No module named 'mine'; a run imports its modules as it did when it started: run this from "
                   "the directory it ran in, or put the module on PYTHONPATH\n")
