"""The spec's shape as dataclasses: what each key means, its type, its default and its bounds."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from slm_lab_like.agents.base import ComponentSpec
from slm_lab_like.agents.selfplay import OpponentPoolConfig
from slm_lab_like.remote.client import HEARTBEAT


@dataclass
class AgentSpec:
    """One agent: an algorithm (a registry name and its hyperparameters) with its memory and net."""

    name: str
    algorithm: ComponentSpec
    memory: ComponentSpec | None = None
    net: ComponentSpec | None = None
    opponent_pool: OpponentPoolConfig | None = None


@dataclass
class BodyOptions:
    """A body's place in a multi-agent env: its player(s) by name or role, its entity, its null obs/action.

    `player` names one env player, or several for a super body (one body, concatenated spaces); `role`
    takes the first free player named `role` or `role_<i>`; without either, bodies take the free players
    in order. `entity` (envs with an entity space) is a type name or {"type": ..., param: value}.
    `null_obs` fills the body's observation while its player is done (a number or a flat list);
    `null_action` is sent where the env still asks for an action the body does not give (default 0).
    `super_action`: a super body's action space, "multi" (MultiDiscrete / concatenated Box) or "joint"
    (one Discrete over every combination). Unset keys fall back to `by_agent`, then to the defaults.
    """

    player: str | list[str] | None = None
    role: str | None = None
    entity: str | dict[str, Any] | None = None
    null_obs: float | list[float] | None = None
    null_action: int | float | list[float] | None = None
    super_action: Literal["multi", "joint"] | None = None


@dataclass
class ResourceSpec:
    """What one session (or one judge) reserves on Ray: CPUs and GPUs (fractions allowed)."""

    cpu: float = field(default=1.0, metadata={"min": 0})
    gpu: float = field(default=0.0, metadata={"min": 0})


@dataclass
class RemoteSpec:
    """The judge an env entry's bodies connect to, and the client's side of the judge's options.

    `address`: "tcp://HOST:PORT", or judges the lab starts and stops itself: "spawn" (processes on loopback) or
    "ray" (Ray actors spread over the run's Ray cluster, each with `resources`, bound to its node's address, with
    CURVE keys made for the run when `curve` is true, or unset and some node's address is not loopback; the run's
    sessions must be on Ray too: meta.ray.address). `judges`: how many such judges share the entry's bodies (each
    hosts a contiguous block of them; the lab steps them at once); a lost one is replaced, the episodes it cut
    dropped and counted. `secret_env`: the
    name of an environment variable holding the judge's shared secret (the secret never goes in a spec).
    `curve_server_key`: the judge's public CURVE key, as `serve` prints it (40 characters of z85), or a ZeroMQ
    certificate file holding it. `timeout`: seconds a request waits for the judge; `heartbeat`: seconds between
    ZeroMQ heartbeats that notice a dead judge (0: off). `token_env`: for a multi-agent judge, the name of an
    environment variable holding the token of the seat this entry's one body plays (`serve` prints each seat's
    token; a judge started with `--allow-claim` also lets a body without one claim a free seat)."""

    address: str
    secret_env: str | None = None
    curve_server_key: str | None = None
    timeout: float = field(default=30.0, metadata={"min": 0.1})
    heartbeat: float = field(default=HEARTBEAT, metadata={"min": 0.0})
    token_env: str | None = None
    judges: int = field(default=1, metadata={"min": 1})
    resources: ResourceSpec | None = None
    curve: bool | None = None


@dataclass
class EnvSpec:
    """One env: a gymnasium id, `module:Class` or a multi-agent env, its budget and its episode limit.

    `vector`: how an agent's bodies in a single-agent gymnasium env are stepped: "auto" (the env's native vector
    implementation where gymnasium has one and the env holds 16 or more bodies, else copies in-process),
    "native" (insist on it), "sync" (copies in-process), "async" (copies in worker processes) or "envpool" (one
    envpool batch, with the envpool extra installed).

    Multi-agent envs only: `bodies` gives options per body in slot order (agent, then body index);
    `by_agent` gives options for every body of the agent with that name (`bodies` entries override it).
    """

    name: str
    max_frame: int | None = field(default=None, metadata={"min": 1})
    max_episode: int | None = field(default=None, metadata={"min": 1})
    max_t: int | None = field(default=None, metadata={"min": 1})
    kwargs: dict[str, Any] = field(default_factory=dict)
    vector: Literal["auto", "native", "sync", "async", "envpool"] = "auto"
    remote: str | RemoteSpec | None = None
    target_return: float | None = None
    bodies: list[BodyOptions] | None = None
    by_agent: dict[str, BodyOptions] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.remote, str):  # an address alone is the object form with every option at its default
            self.remote = RemoteSpec(self.remote)


@dataclass
class BodySpec:
    """How bodies are placed: every agent in every env (outer), agent i with env i (inner), or listed (custom)."""

    product: Literal["outer", "inner", "custom"] = "outer"
    num: int | list[int] = 1
    coords: list[list[int]] | None = None


@dataclass
class AshaSpec:
    """ASHA early stopping on Ray Tune: at frame milestones, keep the top 1/reduction_factor of trials by strength.

    `max_frame` is a trial's frames over all its sessions (default: the sum of the env `max_frame`s times
    `max_session`); a trial is first judged after `grace_frame` frames.
    """

    grace_frame: int = field(default=1000, metadata={"min": 1})
    reduction_factor: float = field(default=3.0, metadata={"min": 2})
    max_frame: int | None = field(default=None, metadata={"min": 1})


@dataclass
class RaySpec:
    """Where a trial's sessions and a search's trials run on Ray. `address`: the cluster to join ("auto",
    "HOST:6379", "ray://HOST:10001", or "local" for a private Ray of this machine with `num_cpus`); with it a trial's
    sessions run as Ray tasks spread over the cluster's nodes, each with `resources_per_session`, and a lost one is
    started again from its last checkpoint at most `max_retries` times. A Ray search (`search_backend: "ray"`) runs
    its sessions the same way, on a private local Ray when `address` is unset. `asha`: early stopping of a search."""

    address: str | None = None
    num_cpus: int | None = field(default=None, metadata={"min": 1})
    resources_per_session: ResourceSpec = field(default_factory=ResourceSpec)
    max_retries: int = field(default=2, metadata={"min": 0})
    asha: AshaSpec | None = None


@dataclass
class MetaSpec:
    """Session-level settings, and how a search runs (`search_backend`, `ray`).

    `checkpoint_frequency`: frames (summed over envs) between checkpoints (None: only at the end);
    `checkpoint_memory`: whether replay memories go into checkpoints;
    `checkpoint_keep`: whether every checkpoint's agents are kept, not only the last one's (a run's earlier agents to
    judge it against: a tournament player's `frame`);
    `tensorboard`: whether sessions write TensorBoard event files (their CSVs are written either way).
    """

    max_session: int = field(default=1, metadata={"min": 1})
    max_trial: int = field(default=1, metadata={"min": 1})
    random_seed: int | None = field(default=None, metadata={"min": 0})
    log_frequency: int = field(default=10_000, metadata={"min": 1})
    checkpoint_frequency: int | None = field(default=None, metadata={"min": 1})
    checkpoint_memory: bool = False
    checkpoint_keep: bool = False
    tensorboard: bool = True
    search_backend: Literal["local", "ray"] = "local"
    ray: RaySpec = field(default_factory=RaySpec)


@dataclass
class Spec:
    """A whole, validated spec. `search` keeps the raw search block; see slm_lab_like.spec.search."""

    name: str
    agent: list[AgentSpec]
    env: list[EnvSpec]
    body: BodySpec = field(default_factory=BodySpec)
    meta: MetaSpec = field(default_factory=MetaSpec)
    search: dict[str, Any] = field(default_factory=dict)


@dataclass
class SearchSpec:
    """Search at play time for a checkpoint player: PUCT (AlphaZero's) over its own policy and value heads,
    `simulations` a move, exploration `c_puct`."""

    simulations: int = field(default=100, metadata={"min": 1})
    c_puct: float = field(default=1.5, metadata={"min": 0.0})


@dataclass
class PlayerSpec:
    """One tournament player, exactly one of: `scripted` (`module:Class` instantiated as Class(seed=..., **kwargs) per
    game, e.g. slm_lab_like.envs.mcts:MCTSPlayer with kwargs {"simulations": 1000}, or "random": uniform random
    legal moves), `checkpoint` (a run directory, trial or session, whose agent
    `agent` plays greedily: by name, default the first; `frame` F plays the agent of the run's checkpoint kept at F
    frames (`meta.checkpoint_keep`; the frames its checkpoint.json lists) instead of its last; `snapshot` k plays the
    k-th frozen snapshot of its opponent pool instead, 0 the oldest, -1 the newest; with `search` it chooses each move
    by PUCT over its heads) or
    `submission` (a Python file with `policy(obs)`, run in its own subprocess). Relative paths are taken from the
    current directory, else from the spec's."""

    name: str
    scripted: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None
    agent: str | None = None
    frame: int | None = field(default=None, metadata={"min": 0})
    snapshot: int | None = None
    search: SearchSpec | None = None
    submission: str | None = None


@dataclass
class GameSpec:
    """The game of a tournament: a multi-agent env (PettingZoo AEC or parallel, or a built-in game) and its kwargs."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class TournamentConfig:
    """Who plays whom and how: `pairing` "round_robin" (every table of `seats` players, the game's player count)
    or "swiss" (`rounds` rounds, players of like score meet, no table twice while avoidable); `games` per
    table, seats rotated from game to game; the first `opening_moves` plies of every game are uniform random
    legal moves (so that greedy players meet in varied positions); a submission forfeits a game when it
    crashes, sends an invalid action or takes longer than `move_time_limit` seconds for a move (its first move
    may also take `startup_timeout` seconds to connect)."""

    game: GameSpec
    players: list[PlayerSpec]
    pairing: Literal["round_robin", "swiss"] = "round_robin"
    games: int = field(default=10, metadata={"min": 1})
    rounds: int = field(default=3, metadata={"min": 1})
    opening_moves: int = field(default=0, metadata={"min": 0})
    move_time_limit: float = field(default=5.0, metadata={"min": 0.01})
    startup_timeout: float = field(default=60.0, metadata={"min": 0.1})


@dataclass
class TournamentSpec:
    """A tournament spec: the `tournament` block and `meta` (its `random_seed` seeds every game); `source` is the
    directory of the spec file (relative player paths are looked up there too)."""

    name: str
    tournament: TournamentConfig
    meta: MetaSpec = field(default_factory=MetaSpec)
    source: str = ""
