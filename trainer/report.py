"""Pictures of a run from its metrics.jsonl: report.html beside loss.png, perplexity.png (the causal-LM task),
throughput.png and step-time.png in the run folder (matplotlib, Agg: no display needed), each drawn only when it has a
curve to show.

    python -m trainer.report /out/run-001        # what `make report RUN=/out/run-001` runs
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

class ReportError(Exception):
    pass


def read_events(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every JSON object of metrics.jsonl, and a warning per line that is not one (a run killed mid-write)."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        raise ReportError(f"{path}: cannot read ({e.strerror or e})") from None
    events, warnings = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            warnings.append(f"{path}:{n}: not a JSON line, skipped")
            continue
        if isinstance(record, dict) and isinstance(record.get("event"), str):
            events.append(record)
        else:
            warnings.append(f"{path}:{n}: no \"event\" field, skipped")
    return events, warnings


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def series(events: list[dict[str, Any]], event: str, key: str) -> tuple[list[float], list[float]]:
    pts = [(e["step"], e[key]) for e in events if e["event"] == event and _num(e.get("step")) and _num(e.get(key))]
    return [p[0] for p in pts], [p[1] for p in pts]


def throughput_key(events: list[dict[str, Any]]) -> str:
    """What the run counts its throughput in: tokens_per_s (causal-lm, which also logs sequences as samples_per_s in
    its epochs) or samples_per_s (image and synthetic tasks)."""
    return "tokens_per_s" if any(_num(e.get("tokens_per_s")) for e in events) else "samples_per_s"


def drawable(*lines: list[Any]) -> bool:
    """A chart has something to show when one of its lines has two points or more (one dot is no curve)."""
    return any(len(xs) >= 2 for xs in lines)


def _atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}.")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    _atomic(path, buf.getvalue())


def _loss(events: list[dict[str, Any]], folder: Path, title: str, plt: Any) -> bool:
    lines = [(series(events, event, key), style, label) for event, key, style, label in (
        ("train", "loss", "-", "train loss (log interval)"), ("epoch", "train_loss", "o-", "train loss (epoch)"),
        ("epoch", "val_loss", "s-", "validation loss (epoch)"))]
    if not drawable(*[xs for (xs, _), _, _ in lines]):
        return False
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for (xs, ys), style, label in lines:
        if xs:
            ax.plot(xs, ys, style, label=label, linewidth=1.2, markersize=4)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    if any(y > 0 for y in series(events, "train", "loss")[1]):
        ax.set_yscale("log")
    xs, ys = series(events, "epoch", "val_acc")
    if xs:
        acc = ax.twinx()
        acc.plot(xs, ys, "^--", color="tab:purple", label="validation accuracy", markersize=4)
        acc.set_ylabel("validation accuracy")
        acc.set_ylim(0, 1.02)
        acc.legend(loc="center right", fontsize=8)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(f"{title}: loss and validation")
    ax.grid(alpha=0.3)
    _save(fig, folder / "loss.png")
    return True


def _perplexity(events: list[dict[str, Any]], folder: Path, title: str, plt: Any) -> bool:
    train, val = series(events, "train", "ppl"), series(events, "epoch", "val_ppl")
    if not drawable(train[0], val[0]):
        return False
    fig, ax = plt.subplots(figsize=(8, 3.8))
    for (xs, ys), style, label in ((train, "-", "train perplexity (log interval)"),
                                   (val, "s-", "validation perplexity (epoch)")):
        if xs:
            ax.plot(xs, ys, style, label=label, linewidth=1.2, markersize=4)
    ax.set_xlabel("step")
    ax.set_ylabel("perplexity = exp(loss)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title(f"{title}: perplexity")
    ax.grid(alpha=0.3, which="both")
    _save(fig, folder / "perplexity.png")
    return True


def _throughput(events: list[dict[str, Any]], folder: Path, title: str, plt: Any) -> bool:
    unit = throughput_key(events)
    lines = [(series(events, event, unit), style, label) for event, style, label in
             (("train", "-", "log interval"), ("epoch", "o", "epoch"))]
    if not drawable(*[xs for (xs, _), _, _ in lines]):
        return False
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for (xs, ys), style, label in lines:
        if xs:
            ax.plot(xs, ys, style, label=label, linewidth=1.2, markersize=4)
    ax.set_xlabel("step")
    ax.set_ylabel(f"{unit.removesuffix('_per_s')}/s (all ranks)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title(f"{title}: throughput")
    ax.grid(alpha=0.3)
    _save(fig, folder / "throughput.png")
    return True


def _step_time(events: list[dict[str, Any]], folder: Path, title: str, plt: Any) -> bool:
    ranks = [e for e in events if e["event"] == "ranks" and isinstance(e.get("step_s"), list) and _num(e.get("step"))]
    if len(ranks) < 2:
        return False
    fig, ax = plt.subplots(figsize=(8, 3.8))
    world = max(len(e["step_s"]) for e in ranks)
    shown = min(world, 16)  # a legend of 16 ranks at most; more ranks: their spread
    for r in range(shown):
        pts = [(e["step"], e["step_s"][r] * 1000) for e in ranks if r < len(e["step_s"]) and _num(e["step_s"][r])]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-", linewidth=1, label=f"rank {r} step")
        dpts = [(e["step"], e["data_s"][r] * 1000) for e in ranks
                if isinstance(e.get("data_s"), list) and r < len(e["data_s"]) and _num(e["data_s"][r])]
        ax.plot([p[0] for p in dpts], [p[1] for p in dpts], ":", linewidth=1, label=f"rank {r} data")
    if world > shown:
        steps = [e["step"] for e in ranks]
        ax.fill_between(steps, [min(e["step_s"]) * 1000 for e in ranks], [max(e["step_s"]) * 1000 for e in ranks],
                        alpha=0.2, label=f"all {world} ranks (min-max)")
    ax.set_xlabel("step")
    ax.set_ylabel("ms per step (log-interval mean)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(f"{title}: step time per rank (solid) and batch-fetch time (dotted)")
    ax.grid(alpha=0.3)
    _save(fig, folder / "step-time.png")
    return True


CHARTS = (("loss.png", _loss), ("perplexity.png", _perplexity), ("throughput.png", _throughput),
          ("step-time.png", _step_time))
PNGS = tuple(name for name, _ in CHARTS)


def plot(events: list[dict[str, Any]], folder: Path, title: str) -> list[str]:
    """The charts that have something to show (a picture of one dot, or of nothing, is not drawn); a picture of an
    earlier report that has nothing to show now is removed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    for name, draw in CHARTS:
        if draw(events, folder, title, plt):
            made.append(name)
        else:
            (folder / name).unlink(missing_ok=True)
    return made


def write_html(events: list[dict[str, Any]], folder: Path, title: str, pngs: list[str]) -> Path:
    starts = [e for e in events if e["event"] == "start"]
    done = [e for e in events if e["event"] == "done"]
    epochs = [e for e in events if e["event"] == "epoch"]

    def table(rows: list[dict[str, Any]], keys: list[str]) -> str:
        head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(k)))}</td>" for k in keys) + "</tr>"
                       for r in rows)
        return f"<table><tr>{head}</tr>{body}</table>"

    parts = [f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;border-bottom:1px solid #ddd;"
             "text-align:right}img{max-width:100%}</style>",
             f"<h1>Run {html.escape(title)}</h1>"]
    if starts:
        parts.append(f"<h2>Attempts ({len(starts)})</h2>")
        parts.append(table(starts, ["world", "backend", "device", "restart", "task", "data", "batch_per_rank",
                                    "lr", "epochs"]))
    # the causal-lm task reports perplexity (and next-token accuracy), the classifiers accuracy
    vals = [k for k in ("val_ppl", "val_acc") if any(_num(e.get(k)) for e in epochs)] or ["val_acc"]
    if done:
        parts.append("<h2>Result</h2>" + table(done[-1:], ["epochs", "steps", "best_val_loss",
                                                          *[f"best_{k}" for k in vals if f"best_{k}" in done[-1]],
                                                          "best_epoch", "train_s", "total_s"]))
    parts += [f'<h2>{html.escape(p.removesuffix(".png"))}</h2><img src="{html.escape(p)}" alt="{html.escape(p)}">'
              for p in pngs]
    if epochs:
        parts.append("<h2>Epochs</h2>" + table(epochs, ["epoch", "step", "train_loss", "val_loss", *vals,
                                                         throughput_key(events), "train_s", "checkpoint", "best"]))
    path = folder / "report.html"
    _atomic(path, "\n".join(parts).encode())
    return path


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def report(run_dir: Path) -> tuple[Path, list[str]]:
    """Write report.html and its PNGs into `run_dir`; returns the HTML's path and the warnings."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise ReportError(f"{path}: no such file (RUN must be a run folder: <out-dir>/<run-id>)")
    events, warnings = read_events(path)
    if not any(e["event"] in ("train", "epoch") for e in events):
        raise ReportError(f"{path}: no training figures yet (no \"train\" or \"epoch\" event)")
    title = run_dir.resolve().name
    pngs = plot(events, run_dir, title)
    return write_html(events, run_dir, title, pngs), warnings


def for_folder(folder: Path) -> list[str]:
    """A report for every run folder (a metrics.jsonl) under `folder`, e.g. a simulation's volumes: one line each."""
    lines = []
    for metrics in sorted(folder.glob("**/metrics.jsonl"))[:20]:
        try:
            out, _ = report(metrics.parent)
            lines.append(f"report: {out}")
        except (ReportError, OSError) as e:
            lines.append(f"report: not written for {metrics.parent}: {e}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="make report", description=__doc__.splitlines()[0])
    p.add_argument("run", help="run folder holding metrics.jsonl")
    args = p.parse_args(argv)
    if not args.run:
        print("error: RUN=<run folder> is required, e.g. make report RUN=/out/run-001", file=sys.stderr)
        return 2
    try:
        out, warnings = report(Path(args.run))
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {args.run}: cannot write the report ({e.strerror or e})", file=sys.stderr)
        return 2
    for w in warnings[:10]:
        print(f"warning: {w}", file=sys.stderr)
    if len(warnings) > 10:
        print(f"warning: {len(warnings) - 10} more lines skipped", file=sys.stderr)
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
