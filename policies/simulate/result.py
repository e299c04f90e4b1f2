"""How a simulated run ended and what the simulator prints of it (the summary table, the world it reached, a
diagnosis with the static checks where it failed), and the run folder it writes in: made for it, emptied only when
it made it."""
from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from .diagnose import clip, noise, rejected_setting
from ..render.paths import REPO
from .host import SimulationError
from .pods import SimPod

_DDP = re.compile(r"\[DDP\] world=(\d+)")
_DONE = re.compile(r"\[DONE\] (.*)")


@dataclass
class Result:
    """How a simulated run ended: its pods (their exit codes and what they printed), whether the deadline stopped
    it, how long it took, and where a fault run ended (finished, failed or hung; None for a plain run)."""

    pods: list[SimPod]
    run_dir: Path
    timed_out: bool
    seconds: float
    outcome: tuple[str, str] | None = None

    @property
    def trainers(self) -> list[SimPod]:
        """The pods the run waits for: the training pods, or every pod where none trains."""
        return [sp for sp in self.pods if sp.training] or list(self.pods)

    @property
    def ok(self) -> bool:
        if self.outcome is not None:
            return self.outcome[0] == "finished"
        return not self.timed_out and bool(self.trainers) and all(
            (sp.exit_code == 0 or sp.idle) and sp.completions < 2 for sp in self.trainers)

    def world_size(self) -> int | None:
        for sp in self.trainers:
            for line in sp.lines:
                m = _DDP.search(line)
                if m:
                    return int(m.group(1))
        return None

    def done_line(self) -> str | None:
        for sp in self.trainers:
            for line in sp.lines:
                m = _DONE.search(line)
                if m:
                    return m.group(1)
        return None

    def report(self, static_problems: list[str]) -> str:
        rows = []
        for sp in self.pods:
            if sp.completions > 1:
                state = "exit 0, started again, exit 0 again"
            elif sp.idle and sp.exit_code is None:
                state = "run complete, waiting: stopped"
            elif sp.exit_code is not None:
                state = f"exit {sp.exit_code}"
            elif sp.training:
                state = "stopped at the deadline" if self.timed_out else "stopped after a peer failed"
            else:
                state = "stopped after the trainers"
            last = next((ln for ln in reversed(sp.lines) if ln.strip() and not noise(ln)), "")
            rows.append((sp.name, sp.ip, "trainer" if sp.training else "service", state,
                         "yes" if sp.joined else ("-" if not sp.training else "no"), last[:140]))
        width = [max(len(r[i]) for r in rows + [("pod", "address", "role", "state", "joined", "")]) for i in range(5)]
        lines = ["", "== simulation summary"]
        lines.append("  ".join(h.ljust(w) for h, w in zip(("pod", "address", "role", "state", "joined"), width)))
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r[:5], width)))
        world = self.world_size()
        verdict = "PASSED" if self.ok else ("FAILED: deadline reached" if self.timed_out else "FAILED")
        lines.append(f"pods: {len(self.pods)} ({len(self.trainers)} training); world size reached: "
                     f"{world if world is not None else 'none'}; {self.seconds:.1f} s")
        done = self.done_line()
        if done:
            lines.append(f"trainer: {done}")
        if not self.ok:
            lines.append("diagnosis:")
            joined = [sp.name for sp in self.trainers if sp.joined]
            missing = [sp.name for sp in self.trainers if not sp.joined]
            lines.append(f"  joined the rendezvous: {', '.join(joined) or 'none'}; did not: {', '.join(missing) or 'none'}")
            for sp in self.trainers:
                if sp.completions > 1:
                    lines.append(f"  [{sp.name}] completed, was started again by its controller (restartPolicy Always) "
                                 "and completed again: in the cluster it restarts for ever (the kubelet's back-off "
                                 "grows to 300 s) until the workload is scaled to 0; the repository's trainer waits "
                                 "instead (AFTER_DONE=wait)")
                elif sp.exit_code not in (0, None) or (sp.exit_code is None and not sp.idle):
                    for ln in sp.last_words or ["(printed nothing)"]:
                        lines.append(f"  [{sp.name}] {clip(ln, 220)}")
            # The value a rank refused, traced to the manifest setting that gave it (said once for the world).
            refused = list(dict.fromkeys(said for sp in self.trainers if (said := rejected_setting(sp))))
            lines += [f"  {r}" for r in refused]
            if static_problems:
                lines.append("  the static checks (make validate) say:")
                lines += [f"    {p}" for p in static_problems]
            elif refused:
                lines.append("  the static checks (make validate) found no error: the setting above is where the "
                             "manifests and the trainer disagree")
            else:
                lines.append("  the static checks (make validate) found no error: the problem is outside the manifests "
                             "(image, script, data), see the pod logs")
        elif static_problems:
            # The run cannot show everything (ports, NetworkPolicies, security settings): never pass it silently.
            lines.append(f"the run trained, but the static checks (make validate) report {len(static_problems)} "
                         f"error{'s' if len(static_problems) != 1 else ''} this machine cannot show:")
            lines += [f"  {p}" for p in static_problems]
            verdict = f"PASSED (the run only; make validate fails on the {len(static_problems)} above)"
        lines.append(f"{verdict}: logs in {self.run_dir / 'logs'}")
        return "\n".join(lines)


# Written into every run folder the simulator makes: the only folders it ever empties.
RUN_MARKER = ".ddp-sim-run"
# What a run folder of an earlier version (before the marker) held: emptied only under the checkout's .sim/.
_LEGACY_RUN_ENTRIES = {"logs", "pods", "pvc"}


def prepare_run_dir(run_dir: Path) -> None:
    """An empty run folder, marked as the simulator's. An existing folder is emptied only when the simulator made it
    (its marker), never when it holds the repository or a .git; anything else is refused before a pod starts."""
    where = run_dir.resolve()
    if where.exists() and not where.is_dir():
        raise SimulationError(f"--run-dir {run_dir}: is a file, not a folder")
    if where == REPO or REPO.is_relative_to(where):
        raise SimulationError(f"--run-dir {run_dir}: holds this repository ({REPO}); the simulator empties its run "
                              "folder: give a folder of its own (default .sim/<overlay>)")
    if where.is_dir():
        entries = {e.name for e in where.iterdir()}
        if ".git" in entries:
            raise SimulationError(f"--run-dir {run_dir}: holds a .git; the simulator empties its run folder: give a "
                                  "folder of its own (default .sim/<overlay>)")
        legacy = where.parent.is_relative_to(REPO / ".sim") and entries <= _LEGACY_RUN_ENTRIES
        if entries and RUN_MARKER not in entries and not legacy:
            raise SimulationError(f"--run-dir {run_dir}: exists, is not empty and was not made by the simulator (no "
                                  f"{RUN_MARKER} in it): give a new or empty folder, or remove this one yourself")
        for e in where.iterdir():  # the folder itself stays: a user may have made it (empty)
            if e.is_dir() and not e.is_symlink():
                shutil.rmtree(e)
            else:
                e.unlink()
    where.mkdir(parents=True, exist_ok=True)
    (where / RUN_MARKER).write_text("made by `python -m policies.simulate`; emptied by its next run into this "
                                    "folder\n")


def default_run_dir(source: str) -> Path:
    """.sim/<overlay>, named from where the overlay is (`..` from an overlay's patches/ names that overlay)."""
    path = Path(source).resolve()
    try:
        name = str(path.relative_to(REPO / "overlays"))
    except ValueError:
        name = path.name or "run"
    return REPO / ".sim" / (re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip(".") or "run")
