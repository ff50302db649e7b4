"""What a newcomer sees: rich tables in the terminal, a JSON file and a PNG per experiment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ARM_LABELS = {"fluence": "Fluence", "first-fit": "first-fit (kube-scheduler-like)",
              "gang-ungated": "gang, ungated (native)"}
TABLE_LABELS = {"fluence": "fluence", "first-fit": "first-fit", "gang-ungated": "gang-ungated"}
CAPTION = {"fluence": "fluence: the real webhook, scheduler, matcher and sidecar",
           "first-fit": "first-fit: kube-scheduler-like, pod by pod, no gangs",
           "gang-ungated": "gang-ungated: all-or-nothing gangs, workers not gated"}
ARM_COLOURS = {"fluence": "#1f77b4", "first-fit": "#d62728", "gang-ungated": "#ff7f0e"}


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def _money(value: Any) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _table(title: str, columns: tuple[str, ...], *, left: tuple[str, ...]) -> Table:
    """A table of ``columns``: the ``left`` ones (names, labels) left-aligned, the figures
    right-aligned."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    return table


def tables(results: dict[str, Any]) -> list[Table]:
    """The experiment's tables, ready for ``console.print``."""
    kind = results["experiment"]
    summary = results["summary"]
    title = f"{results['scenario']}: {results['description']}".rstrip(": ")
    if kind == "gang-contention":
        table = _table(title, ("gang size", "scheduler", "gangs", "mean idle / gang (node-s)",
                               "max idle / gang", "wasted node-s", "restarts", "mean wait (s)"),
                       left=("scheduler",))
        for row in summary["rows"]:
            table.add_row(
                str(row["size"]),
                TABLE_LABELS.get(row["arm"], row["arm"]),
                str(row["gangs"]),
                _num(row["mean_idle_per_gang"]),
                _num(row["max_idle_per_gang"]),
                _num(row["wasted_node_s"]),
                str(row["restarts"]),
                _num(row["mean_wait"]),
            )
        totals = _table(
            "Total wasted node-seconds (members running while their gang could not start)",
            ("scheduler", "wasted node-s", "mean makespan (s)"), left=("scheduler",))
        for arm, total in summary["total_wasted_node_s"].items():
            totals.add_row(
                TABLE_LABELS.get(arm, arm), _num(total), _num(summary["mean_makespan"].get(arm))
            )
        return [table, totals]
    if kind == "two-queue":
        arms = results["schedulers"]
        table = Table(
            title=f"{title} (consumer idle seconds summed over {summary['repeats']} runs)"
        )
        table.add_column("backend")
        table.add_column("size", justify="right")
        for arm in arms:
            table.add_column(f"{TABLE_LABELS.get(arm, arm)} idle s", justify="right")
        for arm in arms:
            if arm != "fluence" and "fluence" in arms:
                table.add_column(f"x less than {arm}", justify="right")
        table.add_column("mean vendor wait (s)", justify="right")
        for row in summary["rows"]:
            cells = [row["backend"], str(row["size"])] + [_num(row[arm]) for arm in arms]
            for arm in arms:
                if arm != "fluence" and "fluence" in arms:
                    ratio = row.get(f"ratio_{arm}")
                    cells.append("-" if ratio is None else f"{ratio:,.1f}x")
            cells.append(_num(row.get(f"{arms[0]}_queue_wait")))
            table.add_row(*cells)
        return [table]
    if kind == "selection":
        table = _table(title, ("policy", "runs", "mean cost", "sd cost",
                               "mean time to result (s)", "sd time", "backends chosen"),
                       left=("policy", "backends chosen"))
        for row in summary["rows"]:
            chosen = ", ".join(f"{k} x{v}" for k, v in row["chosen"].items())
            table.add_row(
                row["policy"],
                str(row["runs"]),
                _money(row["mean_cost"]),
                _money(row["sd_cost"]),
                _num(row["mean_time_to_result"]),
                _num(row["sd_time_to_result"]),
                chosen,
            )
        return [table]
    table = _table(title, ("scheduler", "jobs done", "pods placed", "mean gang wait (s)",
                           "max wait (s)", "idle node-s (gangs)", "idle s (quantum consumers)",
                           "restarts", "makespan (s)"), left=("scheduler",))
    for row in summary["rows"]:
        table.add_row(TABLE_LABELS.get(row["arm"], row["arm"]), f"{row['done']}/{row['jobs']}",
                      str(row["pods_placed"]), _num(row["mean_wait"]), _num(row["max_wait"]),
                      _num(row["idle_node_s"]), _num(row["consumer_idle_s"]), str(row["restarts"]),
                      _num(row["makespan"]))
    return [table]


def jobs_table(results: dict[str, Any], limit: int = 12) -> Table | None:
    """The first jobs of the first repeat, side by side per arm: where gangs waited."""
    runs = [r for r in results["runs"] if r.get("repeat", 0) == 0]
    if results["experiment"] not in ("workload",) or not runs:
        return None
    arms = [r["arm"] for r in runs]
    by_arm = {r["arm"]: {j["job"]: j for j in r["jobs"]} for r in runs}
    first = runs[0]["jobs"][:limit]
    table = Table(
        title=f"Per gang (first {len(first)} of {len(runs[0]['jobs'])}): "
        "wait to place all members, "
        "and node-seconds members idled"
    )
    table.add_column("gang")
    table.add_column("size", justify="right")
    for arm in arms:
        table.add_column(f"{arm} wait", justify="right")
        table.add_column(f"{arm} idle", justify="right")
    for job in first:
        cells = [job["job"], str(job["size"])]
        for arm in arms:
            row = by_arm[arm].get(job["job"], {})
            cells += [_num(row.get("wait")), _num(row.get("idle_node_s"))]
        table.add_row(*cells)
    return table


def print_results(results: dict[str, Any], console: Console) -> None:
    for table in tables(results):
        console.print(table)
    extra = jobs_table(results)
    if extra is not None:
        console.print(extra)
    caption = "; ".join(CAPTION[arm] for arm in results["schedulers"] if arm in CAPTION)
    console.print(f"[dim]{caption}[/]", highlight=False)


def write_json(results: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=False, default=str) + "\n")
    return path


def plot(results: dict[str, Any], path: Path) -> Path | None:
    """A PNG in the style of the paper's figures; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    kind = results["experiment"]
    summary = results["summary"]
    arms = results["schedulers"]
    plt.rcParams.update({"font.size": 10, "axes.spines.top": False, "axes.spines.right": False})
    if kind == "gang-contention":
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
        sizes = sorted({row["size"] for row in summary["rows"]})
        width = 0.8 / len(arms)
        for k, arm in enumerate(arms):
            values = [
                next(
                    r["wasted_node_s"]
                    for r in summary["rows"]
                    if r["size"] == s and r["arm"] == arm
                )
                for s in sizes
            ]
            xs = [i + (k - (len(arms) - 1) / 2) * width for i in range(len(sizes))]
            bars = left.bar(
                xs, values, width, label=ARM_LABELS.get(arm, arm), color=ARM_COLOURS.get(arm)
            )
            left.bar_label(bars, labels=[f"{v:.0f}" for v in values], fontsize=8)
            points = [(sizes.index(g["size"]) + (k - (len(arms) - 1) / 2) * width, g["idle_node_s"])
                      for g in summary["per_gang"] if g["arm"] == arm]
            right.scatter([p[0] for p in points], [p[1] for p in points], s=18, alpha=0.75,
                          color=ARM_COLOURS.get(arm), label=ARM_LABELS.get(arm, arm))
        for axis, label in (
            (left, "total wasted node-seconds"),
            (right, "worker idle per gang (node-s)"),
        ):
            axis.set_xticks(range(len(sizes)), [f"size {s}" for s in sizes])
            axis.set_ylabel(label)
            axis.legend(frameon=False)
        left.set_title("Gang contention: wasted node time")
        right.set_title("Per-gang worker idle time")
    elif kind == "two-queue":
        backends = list(dict.fromkeys(r["backend"] for r in summary["rows"]))
        sizes = sorted({r["size"] for r in summary["rows"]})
        columns = min(3, len(backends))
        rows_n = (len(backends) + columns - 1) // columns
        fig, axes = plt.subplots(
            rows_n, columns, figsize=(4.2 * columns, 3.3 * rows_n), squeeze=False
        )
        width = 0.8 / len(arms)
        for b, backend in enumerate(backends):
            axis = axes[b // columns][b % columns]
            for k, arm in enumerate(arms):
                values = [
                    max(
                        next(
                            r[arm]
                            for r in summary["rows"]
                            if r["backend"] == backend and r["size"] == s
                        ),
                        0.1,
                    )
                    for s in sizes
                ]
                xs = [i + (k - (len(arms) - 1) / 2) * width for i in range(len(sizes))]
                axis.bar(
                    xs, values, width, label=ARM_LABELS.get(arm, arm), color=ARM_COLOURS.get(arm)
                )
            axis.set_yscale("log")
            axis.set_xticks(range(len(sizes)), [str(s) for s in sizes])
            axis.set_title(backend)
            axis.set_xlabel("group size")
            if b % columns == 0:
                axis.set_ylabel("total consumer idle (s)")
        for extra in range(len(backends), rows_n * columns):
            axes[extra // columns][extra % columns].axis("off")
        axes[0][0].legend(frameon=False, fontsize=8)
        fig.suptitle("Two-queue problem: worker idle time, gated (Fluence) vs ungated gangs")
    elif kind == "selection":
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        policies = [r["policy"] for r in summary["rows"]]
        colours = ["#7f7f7f", "#2ca02c", "#9467bd", "#8c564b", "#17becf"]
        for axis, key, sd, label in (
            (left, "mean_cost", "sd_cost", "mean cost per run (USD)"),
            (right, "mean_time_to_result", "sd_time_to_result", "mean time to result (s)"),
        ):
            values = [r[key] or 0.0 for r in summary["rows"]]
            errors = [r[sd] or 0.0 for r in summary["rows"]]
            bars = axis.bar(policies, values, yerr=errors, capsize=4, color=colours[:len(policies)])
            axis.bar_label(
                bars,
                labels=[(f"${v:.2f}" if key == "mean_cost" else f"{v:.0f}") for v in values],
                fontsize=8,
                padding=2,
            )
            axis.set_ylabel(label)
        left.set_title("Cost")
        right.set_title("Time to result")
        fig.suptitle("Policy-aware backend selection")
    else:
        runs = [r for r in results["runs"] if r.get("repeat", 0) == 0]
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
        for k, run in enumerate(runs):
            jobs = run["jobs"]
            xs = list(range(len(jobs)))
            left.bar(
                [x + (k - (len(runs) - 1) / 2) * 0.4 for x in xs],
                [j["wait"] if j["wait"] is not None else 0.0 for j in jobs],
                0.4,
                label=ARM_LABELS.get(run["arm"], run["arm"]),
                color=ARM_COLOURS.get(run["arm"]),
            )
            right.bar(
                [x + (k - (len(runs) - 1) / 2) * 0.4 for x in xs],
                [j["idle_node_s"] for j in jobs],
                0.4,
                label=ARM_LABELS.get(run["arm"], run["arm"]),
                color=ARM_COLOURS.get(run["arm"]),
            )
        left.set_xlabel("gang (arrival order)")
        left.set_ylabel("wait until all members placed (s)")
        right.set_xlabel("gang (arrival order)")
        right.set_ylabel("member idle (node-s)")
        left.legend(frameon=False)
        right.legend(frameon=False)
        fig.suptitle(results["description"] or results["scenario"])
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
