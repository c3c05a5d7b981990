"""A deployment's dump (a summary's `deployment`) as the text a run or a submission prints."""

from __future__ import annotations


def layout_text(dep: dict) -> str:
    """A deployment's parallelism from its dump: `tp8 pp1 ep8 attention-dp`, a disaggregated one's per pool."""
    def one(p: dict) -> str:
        return f"tp{p['tp']} pp{p['pp']} ep{p['ep']}{' attention-dp' if p['attention_dp'] else ''}"

    if dep.get("mode") == "disaggregated":
        return f"prefill {one(dep['prefill'])}, decode {one(dep['decode'])}"
    return one(dep)


def batch_limits(dep: dict) -> dict:
    """The dump that holds a deployment's batch limits: its own, or a disaggregated one's decode pool's."""
    return dep["decode"] if dep.get("mode") == "disaggregated" else dep
