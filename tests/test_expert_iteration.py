"""Expert iteration: PUCT over many positions at once (one evaluation a simulation for every tree), the targets it
keeps (visit distributions, each position's return once its game is over, mirrored halves), and the algorithm in the
lab: self-play on the built-in and PettingZoo's connect four, greedy raw-policy play, checkpoints, one-line errors."""
from __future__ import annotations

import copy
import gc
import json
import math
import random
from typing import Any

import numpy as np
import pytest
import torch

from slm_lab_like.agents.expert_iteration import (Episodes, ExpertIteration, SearchReplay, completed_q_policy,
                                                 loses_at_once, proven_move, proven_positions, sharpened)
from slm_lab_like.envs.games.connect_four import ConnectFour
from slm_lab_like.tree_search import MCTS, Node, choice, mix_noise, root_value, visit_policy
from slm_lab_like.spec.errors import SpecError
from slm_lab_like.spec.load import validate
from tests.helpers import game_of, train

PZ_CONNECT_FOUR = "pettingzoo.classic.connect_four_v3:env"


def uniform(states: list[Any]) -> list[tuple[dict[int, float], list[float]]]:
    """An evaluator that knows nothing: uniform priors, every value 0; and counts its calls."""
    uniform.calls += 1  # type: ignore[attr-defined]
    return [({a: 1.0 / len(s.legal_actions()) for a in s.legal_actions()}, [0.0, 0.0]) for s in states]


def test_batched_puct_takes_wins_and_blocks_losses_in_every_tree_with_one_evaluation_a_simulation() -> None:
    uniform.calls = 0  # type: ignore[attr-defined]
    win, block, opening = game_of([0, 6, 1, 6, 2, 5]), game_of([0, 6, 1, 6, 2]), ConnectFour()
    roots = MCTS(200, seed=0).search_many([win, block, opening], uniform)
    assert [choice(r) for r in roots[:2]] == [3, 3]
    assert uniform.calls <= 200  # type: ignore[attr-defined]
    assert win.num_moves == 6 and block.num_moves == 5 and opening.num_moves == 0  # searched from copies
    assert roots[0].outcome == [1.0, -1.0]  # proven: a win in one for the mover (player 0)
    assert visit_policy(roots[0], 7).tolist() == [0, 0, 0, 1, 0, 0, 0]
    spread = visit_policy(roots[2], 7)
    assert spread.sum() == pytest.approx(1.0) and (spread > 0).all() and roots[2].visits == 200


def test_sharpened_targets_keep_a_distribution_nearer_the_most_visited_move() -> None:
    pi = np.array([0.5, 0.3, 0.2, 0.0], np.float32)
    assert sharpened(pi, 1.0) is pi
    sharp = sharpened(pi, 0.5)
    assert sharp.sum() == pytest.approx(1.0) and sharp[0] > pi[0] and sharp[3] == 0
    assert sharp.tolist() == pytest.approx([25 / 38, 9 / 38, 4 / 38, 0.0])


def root_of(children: list[tuple[int, int, float]]) -> Node:
    """A searched root whose children are (action, visits, mean return for the mover)."""
    root = Node(-1, -1)
    root.children = [Node(a, 0) for a, _, _ in children]
    for child, (_, visits, q) in zip(root.children, children):
        child.visits, child.total = visits, visits * q
    return root


def test_the_completed_q_target_moves_the_nets_policy_toward_the_better_moves() -> None:
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.1, 0.5]))
    logits[4] = -1e9  # illegal: not a child of the root
    unsearched = completed_q_policy(root_of([(a, 0, 0.0) for a in range(4)]), logits, value=0.3)
    assert unsearched.tolist() == pytest.approx([0.4, 0.3, 0.2, 0.1, 0.0])  # nothing searched: the net's policy
    target = completed_q_policy(root_of([(0, 6, -0.5), (1, 3, 0.8), (2, 1, 0.1), (3, 0, 0.0)]), logits, value=0.0)
    assert target.sum() == pytest.approx(1.0) and target[4] == 0
    assert target[1] > 0.9 and target[0] < target[3] < target[2]  # the best q wins; the unvisited gets the mixed q
    mixed = (0.0 + 10 * (0.4 * -0.5 + 0.3 * 0.8 + 0.2 * 0.1) / 0.9) / 11
    sigma = (50 + 6) * 0.1 * (np.array([-0.5, 0.8, 0.1, mixed]) + 0.5) / 1.3
    expected = np.exp(logits[:4] + sigma)
    assert target[:4].tolist() == pytest.approx((expected / expected.sum()).tolist(), rel=1e-5)
    proven = root_of([(0, 2, 0.0), (1, 1, 1.0)])
    proven.children[1].outcome, proven.outcome = [1.0, -1.0], [1.0, -1.0]
    assert completed_q_policy(proven, logits, 0.0).tolist() == [0, 1, 0, 0, 0]


def test_self_play_learns_completed_q_targets_over_legal_moves() -> None:
    space, _ = train(validate(exit_spec(frames=1000, policy_target="completed_q"), "exit"), seed=3)
    agent = space.agent_space.agents[0]
    n = len(agent.replays[0])
    replay = agent.replays[0]
    assert n > 500 and agent.opt_step > 0 and np.allclose(replay.pi[:n].sum(axis=1), 1.0)
    assert not (replay.pi[:n] * ~replay.mask[:n]).any()
    assert ((replay.pi[:n] > 0) & (replay.pi[:n] < 1)).any(axis=1).mean() > 0.5  # not the visit counts' one-hots


def test_a_nodes_proven_move_is_its_wins_or_its_one_move_not_lost() -> None:
    node = root_of([(0, 1, 0.0), (1, 1, 0.0), (2, 1, 0.0)])
    assert proven_move(node) is None  # nothing proven
    node.children[0].outcome = [-1.0, 1.0]
    node.children[2].outcome = [-1.0, 1.0]
    assert proven_move(node) == ([1], pytest.approx(math.nan, nan_ok=True))  # the one move not proven to lose
    node.children[1].outcome = [0.0, 0.0]
    assert proven_move(node) == ([1], pytest.approx(math.nan, nan_ok=True))  # a proven draw is not a loss
    node.children[0].outcome = node.children[2].outcome = [1.0, -1.0]
    assert proven_move(node) == ([0, 2], 1.0)  # every proven win
    assert proven_move(root_of([(4, 3, 0.0)])) is None and proven_move(root_of([])) is None


def test_a_forced_block_is_found_two_plies_deep_where_a_threat_shows() -> None:
    block = game_of([0, 6, 1, 6, 2])  # the second player must play 3, or the first wins there
    node = root_of([(a, 0, 0.0) for a in block.legal_actions()])
    for child in node.children:
        child.player = 1  # the second player's moves
    assert proven_move(node, block) is None  # no sign of a threat: nothing tried
    node.children[0].outcome = [1.0, -1.0]  # the search proved one move lost
    assert proven_move(node, block) == ([3], pytest.approx(math.nan, nan_ok=True))
    node.children[0].outcome, node.visits, node.children[1].visits = None, 4, 3
    assert proven_move(node, block) == ([3], pytest.approx(math.nan, nan_ok=True))  # a much-visited favourite loses
    quiet = game_of([0, 6])
    node = root_of([(a, 1, 0.0) for a in quiet.legal_actions()])
    node.visits = 10
    assert proven_move(node, quiet) is None  # no move loses at once: nothing forced


class WithoutWinningActions(ConnectFour):
    """A game without the protocol's optional threat test: the threat test copies the position and tries each reply."""

    winning_actions = None


def test_the_threat_test_answers_alike_with_the_games_winning_actions_and_without() -> None:
    rng, threats, tried = random.Random(0), 0, 0
    for _ in range(300):
        game = game_of([])
        for _ in range(rng.randint(4, 36)):
            if game.is_terminal():
                break
            game.apply(rng.choice(game.legal_actions()))
        for action in game.legal_actions():
            plain = WithoutWinningActions.from_board(game.board, game.current_player())
            assert type(plain.copy()) is WithoutWinningActions  # the branches the test tries keep the class
            fast, slow = loses_at_once(game, action), loses_at_once(plain, action)
            assert fast == slow
            threats, tried = threats + fast, tried + 1
    assert 0.05 * tried < threats < 0.95 * tried  # both answers occur often


def test_a_training_step_searches_with_the_collector_paused_and_turns_it_back_on() -> None:
    """The step's trees are freed before the cyclic collector is back: no collection runs during the search (one
    would walk every node), and the collector is on again after it."""
    collections = []
    agent = built(exit_spec(simulations=64))
    agent.set_training(True)
    obs, legal = ConnectFour.observations([game_of([k % 7]) for k in range(16)])

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        moves = agent.act(0, obs.astype(np.float32), mask=legal)
        during = len(collections)
        garbage = [[] for _ in range(100_000)]  # enough new containers to set off a collection once it is on
    finally:
        gc.callbacks.remove(count)
    assert during == 0 and len(collections) > 0 and gc.isenabled() and len(garbage) == 100_000
    assert legal[np.arange(16), moves].all()


def test_a_trees_proven_positions_are_wins_and_forced_blocks_of_the_game() -> None:
    uniform.calls = 0  # type: ignore[attr-defined]
    start = game_of([0, 6, 1, 6])
    root = MCTS(300, seed=0).search_many([start], uniform)[0]
    found = proven_positions(root, start, 100)
    wins = [(p, moves) for p, moves, v in found if v == 1.0]
    forced = [(p, moves) for p, moves, v in found if math.isnan(v)]
    assert len(wins) + len(forced) == len(found) and wins and forced and start.num_moves == 4
    for position, moves in wins:
        assert all(position.wins_with(position.current_player(), c) for c in moves)
    for position, (move,) in forced:
        for other in set(position.legal_actions()) - {move}:
            after = position.copy()
            after.apply(other)
            assert after.winning_moves(position.current_player() ^ 1)  # any other move hands over a win at once
    assert len(proven_positions(root, start, 3)) == 3


def test_self_play_keeps_proven_positions_without_a_value_where_none_is_proven() -> None:
    space, _ = train(validate(exit_spec(frames=800, proven_positions=4, simulations=32), "exit"), seed=3)
    agent = space.agent_space.agents[0]
    replay = agent.replays[0]
    n = len(replay)
    z = replay.z[:n]
    assert np.isnan(z).any() and (z == 1).any() and agent.opt_step > 0 and math.isfinite(agent.last_loss)
    assert np.allclose(replay.pi[:n].sum(axis=1), 1.0) and not (replay.pi[:n] * ~replay.mask[:n]).any()


def test_root_noise_keeps_a_distribution_and_moves_it() -> None:
    root = MCTS(1, seed=0).search_many([ConnectFour()], uniform)[0]
    before = [c.prior for c in root.children]
    mix_noise(root, (1.0, 0.25), np.random.default_rng(0))
    after = [c.prior for c in root.children]
    assert sum(after) == pytest.approx(1.0) and after != before and min(after) >= 0.75 * min(before)


def test_a_games_positions_get_their_discounted_returns_and_a_body_without_moves_none() -> None:
    episodes = Episodes(2)
    for t, reward in enumerate((0.0, 0.0, -1.0)):
        episodes.add(0, np.full((2,), t, np.float32), np.ones(3, bool), np.eye(3, dtype=np.float32)[t], reward)
    obs, mask, pi, z = episodes.finish(0, gamma=0.5)  # type: ignore[misc]
    assert z.tolist() == [-0.25, -0.5, -1.0] and obs[:, 0].tolist() == [0, 1, 2] and (pi == np.eye(3)).all()
    assert episodes.finish(0, 0.5) is None and episodes.finish(1, 0.5) is None


def test_the_replay_overwrites_its_oldest_and_saves_oldest_first() -> None:
    replay = SearchReplay(4, (1,), 2)
    for start in (0, 3):
        n = 3
        replay.add(np.arange(start, start + n, dtype=np.float32)[:, None], np.ones((n, 2), bool),
                   np.full((n, 2), 0.5, np.float32), np.arange(start, start + n, dtype=np.float32))
    assert len(replay) == 4 and sorted(replay.z.tolist()) == [2, 3, 4, 5]
    saved = replay.state_dict()
    assert saved["z"].tolist() == [2, 3, 4, 5]
    again = SearchReplay(4, (1,), 2)
    again.load_state_dict(saved)
    assert again.z.tolist() == [2, 3, 4, 5] and again.head == 0 and again.full


def test_mirroring_flips_the_board_and_reverses_the_moves() -> None:
    game = game_of([0, 0, 1])
    obs = game.planes(1)[None].astype(np.float32)
    mask = np.array([[True, True, False, True, True, True, False]])
    pi = np.array([[0.5, 0.5, 0, 0, 0, 0, 0]], np.float32)
    m_obs, m_mask, m_pi = ConnectFour.mirror(obs, mask, pi)
    assert (m_obs[0] == game_of([6, 6, 5]).planes(1)).all()
    assert m_mask[0].tolist() == mask[0, ::-1].tolist() and m_pi[0].tolist() == [0, 0, 0, 0, 0, 0.5, 0.5]


def exit_spec(env: str = "connect_four_batch", frames: int = 3000, **algorithm: Any) -> dict[str, Any]:
    return {"agent": [{"name": "exit",
                       "algorithm": {"name": "ExpertIteration", "simulations": 8, "mirror": True,
                                     "train_every": 256, "learning_starts": 256, "batch_size": 64, **algorithm},
                       "net": {"name": "MLP", "hid_layers": [32], "shared": True}}],
            "env": [{"name": env, "max_frame": frames}],
            "body": {"product": "outer", "num": 16},
            "meta": {"max_session": 1, "random_seed": 3, "log_frequency": 1000}}


def built(raw: dict[str, Any], seed: int = 3) -> Any:
    """The first agent of a raw spec, built as a session builds it (nothing run)."""
    from slm_lab_like.aeb.space import AEBSpace

    space = AEBSpace.build(validate(raw, "exit"), seed)
    space.close()
    return space.agent_space.agents[0]


def test_a_leafs_value_mixes_the_nets_value_with_a_random_games_returns() -> None:
    import random

    agent = built(exit_spec(rollout_weight=0.25))
    state = game_of([3, 0, 2, 0, 6])  # player 1 to move
    agent.mcts.rng = random.Random(5)
    ((priors, values),) = agent._evaluator(0)([state])
    obs, legal = ConnectFour.observations([state])
    probs, v = agent.policy_value(0, obs, legal)
    agent.mcts.rng = random.Random(5)
    rollout = agent.mcts.rollouts_from(state)
    net = [-float(v[0]), float(v[0])]
    assert values == pytest.approx([0.75 * a + 0.25 * b for a, b in zip(net, rollout)])
    assert list(priors) == pytest.approx(probs[0].tolist()) and sum(priors) == pytest.approx(1.0)


def test_a_roots_value_is_its_proven_result_or_its_childrens_mean_return_for_the_mover() -> None:
    root = Node(-1, -1)
    assert math.isnan(root_value(root))
    root.children = [Node(0, 1), Node(1, 1), Node(2, 1)]
    assert math.isnan(root_value(root))  # expanded, nothing visited
    root.children[0].visits, root.children[0].total = 3, 1.0
    root.children[1].visits, root.children[1].total = 1, -1.0
    assert root_value(root) == pytest.approx(0.0)  # (1 - 1) / 4: the visits' mean, not the children's
    root.children[2].visits, root.children[2].total = 4, 4.0
    assert root_value(root) == pytest.approx(0.5)
    root.outcome = [-1.0, 1.0]
    assert root_value(root) == 1.0  # proven: the mover's (player 1's) result


def test_a_positions_value_target_mixes_the_games_result_with_its_searchs_value() -> None:
    episodes = Episodes(1)
    for t, (reward, value) in enumerate(((0.0, 0.5), (0.0, math.nan), (1.0, 0.9))):
        episodes.add(0, np.zeros(2, np.float32), np.ones(3, bool), np.eye(3, dtype=np.float32)[t], reward, value)
    *_, z = episodes.finish(0, gamma=1.0, value_weight=0.25)  # type: ignore[misc]
    assert z.dtype == np.float32 and z == pytest.approx([0.75 + 0.125, 1.0, 0.75 + 0.225])  # no value: the result
    episodes.add(0, np.zeros(2, np.float32), np.ones(3, bool), np.eye(3, dtype=np.float32)[0], -1.0, 0.3)
    assert episodes.finish(0, gamma=1.0)[3].tolist() == [-1.0]  # type: ignore[index]  # weight 0: the result alone


def test_self_play_value_targets_take_the_searchs_values_by_their_weight() -> None:
    """With weight 1 a kept game position's value target is its search's root value: not only the results -1, 0, 1,
    and within [-1, 1]."""
    space, _ = train(validate(exit_spec(frames=1000, sample_reuse=0, search_value_weight=1.0), "exit"), seed=3)
    replay = space.agent_space.agents[0].replays[0]
    z = replay.z[:len(replay)]
    assert len(z) > 256 and np.isfinite(z).all() and np.abs(z).max() <= 1.0
    assert (~np.isin(z, [-1.0, 0.0, 1.0])).mean() > 0.5


def test_self_play_keeps_searched_positions_with_the_games_results_and_trains_on_them() -> None:
    space, _ = train(validate(exit_spec(), "exit"), seed=3)
    agent = space.agent_space.agents[0]
    assert isinstance(agent, ExpertIteration)
    replay = agent.replays[0]
    n = len(replay)
    assert n > 1000 and agent.opt_step > 0 and 0 <= space.env_space.envs[0].clock.frame - agent.frame <= 16
    assert np.allclose(replay.pi[:n].sum(axis=1), 1.0) and set(np.unique(replay.z[:n])) <= {-1.0, 0.0, 1.0}
    assert not (replay.pi[:n] * ~replay.mask[:n]).any()  # the search puts nothing on an illegal move
    assert (replay.z[:n] == 1).sum() > 0 and (replay.z[:n] == -1).sum() > 0
    agent.set_training(False)
    obs = ConnectFour().planes(0)[None].astype(np.float32)
    full = np.array([[False, True, True, True, True, True, True]])
    moves = agent.act(0, np.repeat(obs, 2, axis=0), mask=np.repeat(full, 2, axis=0))
    assert moves.tolist()[0] == moves.tolist()[1] != 0  # greedy and legal


def test_the_spec_runs_unchanged_on_pettingzoos_connect_four_in_test_mode() -> None:
    """The recipe is a spec, not code for one game: only the env's name changes (issue 28, part 5)."""
    pytest.importorskip("pettingzoo")
    from slm_lab_like.experiment.trial import run_trial
    from slm_lab_like.spec.load import pick, with_mode

    raw, name = pick("spec/expert_iteration_connect_four.json")
    raw["env"][0]["name"] = PZ_CONNECT_FOUR
    result = run_trial(with_mode(validate(raw, name), "test"), None, "test")
    (session,) = result.sessions
    assert session.env_frames[0] > 0 and session.env_names == [PZ_CONNECT_FOUR]


def test_a_checkpoint_keeps_the_net_the_optimiser_and_the_replay() -> None:
    space, _ = train(validate(exit_spec(frames=1000), "exit"), seed=3)
    agent = space.agent_space.agents[0]
    other = built(exit_spec(), seed=4)
    other.load_state_dict(agent.state_dict())
    other.load_memory_state_dict(agent.memory_state_dict())
    assert other.opt_step == agent.opt_step and len(other.replays[0]) == len(agent.replays[0])
    assert other.mcts.rng.random() == agent.mcts.rng.random() and other.rng.random() == agent.rng.random()
    for a, b in zip(agent.policy.parameters(), other.policy.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("algorithm, key, message", [
    ({"game": "nowhere:Game"}, "agent[0].algorithm.game", "cannot load game"),
    ({"game": "slm_lab_like.envs.games.connect_four:WinBlockPlayer"}, "agent[0].algorithm.game", "from_observation"),
    ({"simulations": 0}, "agent[0].algorithm.simulations", ">= 1"),
    ({"simulation": 10}, "agent[0].algorithm", "simulation"),
    ({"policy_target": "visit"}, "agent[0].algorithm.policy_target", "visits"),
    ({"search_value_weight": 1.5}, "agent[0].algorithm.search_value_weight", "<= 1"),
])
def test_bad_settings_are_one_line_errors_at_their_key(algorithm: dict, key: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        validate(exit_spec(**algorithm), "exit")
    assert caught.value.path.startswith(key) and "\n" not in str(caught.value)


def test_mirroring_a_game_without_a_mirror_is_refused_at_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(ConnectFour, "mirror")
    with pytest.raises(SpecError, match="has no mirror") as caught:
        validate(exit_spec(), "exit")
    assert caught.value.path == "agent[0].algorithm.mirror"


def test_a_game_that_cannot_rebuild_the_envs_observations_is_refused_at_its_key() -> None:
    raw = exit_spec()
    raw["env"][0] = {"name": "CartPole-v1", "max_frame": 100}
    raw["body"]["num"] = 1
    with pytest.raises(SpecError, match="cannot rebuild a position from observations Box") as caught:
        validate(raw, "exit")
    assert caught.value.path == "agent[0].algorithm.game" and "set game to your game's class" in str(caught.value)


class WithoutPlayout(ConnectFour):
    """A game without the protocol's optional fast rollout, as most users' games are."""

    playout = None


def test_leaf_rollouts_of_a_game_without_playout_leave_the_leaf_to_expand() -> None:
    """The batched search expands each leaf after its evaluation, whose random rollout must not play the leaf out
    (it did, for games without `playout`: the leaf had no children and the policy target failed)."""
    state = WithoutPlayout.from_board(game_of([3, 3, 4]).board)
    returns = MCTS(8, seed=0).rollouts_from(state)
    assert state.num_moves == 3 and not state.is_terminal() and sorted(returns) in ([-1.0, 1.0], [0.0, 0.0])
    space, _ = train(validate(exit_spec(frames=1000, rollout_weight=0.5, policy_target="completed_q",
                                        game="tests.test_expert_iteration:WithoutPlayout"), "exit"), seed=3)
    assert len(space.agent_space.agents[0].replays[0]) > 256


class MissesAColumn(ConnectFour):
    """A game that misreads the env: column 0 is never legal in its positions."""

    def legal_actions(self) -> list[int]:
        return [a for a in super().legal_actions() if a != 0]


def test_a_game_whose_positions_disagree_with_the_envs_mask_fails_in_one_line_naming_both() -> None:
    """A user's game whose from_observation misreads the env passes `check` (an empty board has no full column to
    tell) and is caught at its first searched move, not by numpy deep inside the policy target."""
    spec = validate(exit_spec(frames=1000, game="tests.test_expert_iteration:MissesAColumn"), "exit")
    with pytest.raises(Exception, match=r"rebuilt a position whose legal actions \[1, 2, 3, 4, 5, 6\] are not the "
                                        r"env's action mask \[0, 1, 2, 3, 4, 5, 6\]") as caught:
        train(spec, seed=0)
    assert "MissesAColumn" in str(caught.value) and "\n" not in str(caught.value)


def test_without_sample_reuse_the_search_plays_and_the_net_takes_no_step() -> None:
    space, _ = train(validate(exit_spec(frames=1000, sample_reuse=0), "exit"), seed=3)
    agent = space.agent_space.agents[0]
    assert len(agent.replays[0]) > 256 and agent.opt_step == 0


def test_random_moves_open_each_game_with_up_to_k_uniform_moves_of_each_body() -> None:
    """Each game a body draws n from 0..k and plays its first n moves uniformly among the legal ones; the others (and
    every move without the option) are the search's."""
    position, legal = ConnectFour.observations([game_of([6] * 6)])  # column 6 full: never drawn
    obs, legal = np.repeat(position.astype(np.float32), 16, axis=0), np.repeat(legal, 16, axis=0)

    def first_moves(**algorithm: Any) -> tuple[np.ndarray, np.ndarray]:
        agent = built(exit_spec(sample_moves=0, dirichlet_fraction=0.0, simulations=32, **algorithm))
        agent.set_training(True)
        moves, drawn = [], []
        for _ in range(12):
            agent.moves[0][:] = 0  # every body starts a game
            moves.append(agent.act(0, obs, mask=legal))
            drawn.append(agent.random_left[0].copy())
        return np.concatenate(moves), np.concatenate(drawn)

    searched, none_drawn = first_moves()
    opened, drawn = first_moves(random_moves=4)
    assert not none_drawn.any() and set(drawn.tolist()) == {0, 1, 2, 3, 4}
    assert len(set(searched.tolist())) == 1 and 6 not in searched  # the same search, the same move
    assert set(opened[drawn == 0].tolist()) == set(searched.tolist())
    counts = np.bincount(opened[drawn > 0], minlength=7)
    assert counts[6] == 0 and (counts[:6] > len(opened[drawn > 0]) / 12).all()  # every legal column, about evenly


def test_random_move_rate_plays_a_share_of_every_later_move_at_random() -> None:
    """With rate p each move is uniformly random with probability p, at any ply; at 0 every move is the search's."""
    position, legal = ConnectFour.observations([game_of([6] * 6 + [0, 1, 0, 1, 2, 3])])  # mid-game, column 6 full
    obs, legal = np.repeat(position.astype(np.float32), 16, axis=0), np.repeat(legal, 16, axis=0)

    def later_moves(rate: float) -> np.ndarray:
        agent = built(exit_spec(sample_moves=0, dirichlet_fraction=0.0, simulations=32, random_move_rate=rate))
        agent.set_training(True)
        moves = []
        for _ in range(4):
            agent.moves[0][:] = 20  # every body well past its opening
            moves.append(agent.act(0, obs, mask=legal))
        return np.concatenate(moves)

    searched = later_moves(0.0)
    assert len(set(searched.tolist())) == 1 and 6 not in searched
    mixed = later_moves(0.5)
    off_search = mixed != searched[0]
    assert 6 not in mixed and 12 <= off_search.sum() <= 40  # about 6/7 of half the moves leave the search's choice
    assert len(set(later_moves(1.0).tolist())) >= 5  # all random: nearly every legal column


def filled(agent: Any, positions: int = 512) -> Any:
    """`agent` with a replay of `positions` random positions of legal-move targets, waiting to train on them."""
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 2, (positions, 6, 7, 2)).astype(np.float32)
    mask = np.ones((positions, 7), bool)
    pi = rng.dirichlet(np.ones(7), positions).astype(np.float32)
    agent.replays[0].add(obs, mask, pi, rng.choice([-1.0, 0.0, 1.0], positions).astype(np.float32))
    agent.new_positions = positions
    return agent


def weights(net: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in net.parameters()]


def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def test_the_learner_thread_takes_the_same_steps_and_the_search_uses_the_net_a_round_behind() -> None:
    threaded, inline = (filled(built(exit_spec(learner_thread=flag))) for flag in (True, False))
    start = weights(threaded.policy)
    threaded._train()
    inline._train()
    assert same(weights(threaded.actor), start)  # the search plays the round before's net while the learner learns
    threaded._wait()
    first = weights(threaded.policy)
    assert same(first, weights(inline.policy)) and not same(first, start)  # the same steps as without the thread
    assert threaded.opt_step == inline.opt_step == 32 and math.isfinite(threaded.last_loss)
    threaded.new_positions = 512
    threaded._train()
    assert same(weights(threaded.actor), first)
    threaded._wait()
    assert threaded.opt_step == 64 and threaded.learner is None


def test_a_checkpoint_taken_while_the_learner_learns_resumes_both_nets() -> None:
    agent = filled(built(exit_spec(learner_thread=True)))
    agent._train()
    state = copy.deepcopy(agent.state_dict())  # waits for the round; a copy, as a checkpoint file is
    assert agent.learner is None and agent.opt_step == 32
    other = built(exit_spec(learner_thread=True), seed=4)
    other.load_state_dict(state)
    assert same(weights(other.policy), weights(agent.policy)) and same(weights(other.actor), weights(agent.actor))
    assert not same(weights(other.policy), weights(other.actor))
    agent.new_positions = 512
    agent._train()  # a round learning while the checkpoint loads: it ends first, and the checkpoint's count stands
    agent.load_state_dict(state)
    assert agent.opt_step == 32 and same(weights(agent.policy), weights(other.policy))


def test_a_failure_on_the_learner_thread_is_raised_in_the_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    agent = filled(built(exit_spec(learner_thread=True)))

    def broken(*_: Any) -> Any:
        raise RuntimeError("the learner broke")

    monkeypatch.setattr(agent, "_losses", broken)
    agent._train()
    with pytest.raises(RuntimeError, match="the learner broke"):
        agent.state_dict()
    assert agent.learner is None


def test_self_play_with_a_learner_thread_trains_and_plays_its_latest_net() -> None:
    space, _ = train(validate(exit_spec(frames=2000, learner_thread=True), "exit"), seed=3)
    agent = space.agent_space.agents[0]
    agent.set_training(False)
    obs = ConnectFour().planes(0)[None].astype(np.float32)
    agent.act(0, obs, mask=np.ones((1, 7), bool))
    assert agent.learner is None and agent.opt_step > 0


def test_a_run_with_a_learner_thread_resumes_alike_from_its_checkpoint(tmp_path: Any) -> None:
    """Two sessions stopped after their checkpoint and resumed end with the same nets, both of them, and metrics."""
    from slm_lab_like.analysis.metrics import metrics_path, read_csv
    from slm_lab_like.experiment.session import Session

    raw = exit_spec(frames=2400, learner_thread=True)
    raw["meta"].update(checkpoint_frequency=1200, checkpoint_memory=True, log_frequency=600)
    spec = validate(raw, "exit")

    class Stop(Exception):
        pass

    def stop_after_checkpoint(frame: int, wall: float, metrics: Any) -> None:
        if frame > 1200:
            raise Stop

    runs = [tmp_path / "a", tmp_path / "b"]
    for d in runs:
        with pytest.raises(Stop):
            Session(spec, 0, 3, d, on_progress=stop_after_checkpoint).run()
    for d in runs:
        Session(spec, 0, 3, d, resume=True).run()
    saved = [torch.load(d / "agent_a0.pt", weights_only=True) for d in runs]
    assert saved[0]["opt_step"] > 0 and "actor" in saved[0]
    for key in ("policy", "actor"):
        assert all(torch.equal(saved[0][key][k], saved[1][key][k]) for k in saved[0][key])
    rows = [[{k: v for k, v in r.items() if k not in ("wall_time", "fps")} for r in read_csv(metrics_path(d, (0, 0, 0)))]
            for d in runs]
    assert json.dumps(rows[0]) == json.dumps(rows[1]) and len(rows[0]) > 2  # as text: a loss may be NaN
