"""Per-request results, kept in preallocated arrays and turned into a DataFrame once at the end."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpusim.loadgen.metrics import REQUEST_COLUMNS


class Records:
    """Times and counts of every request of a run, indexed by request id."""

    def __init__(self, input_tokens: np.ndarray, output_tokens: np.ndarray) -> None:
        n = len(input_tokens)
        self.input_tokens = np.array(input_tokens, dtype=np.int64)
        self.output_tokens = np.array(output_tokens, dtype=np.int64)
        self.scheduled_s = np.full(n, np.nan)
        self.first_token_s = np.full(n, np.nan)
        self.completion_s = np.full(n, np.nan)
        self.instance = np.full(n, -1, dtype=np.int64)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.prefill_instance = np.full(n, -1, dtype=np.int64)
        """Disaggregated serving: the prefill instance (`instance` is then the decode instance)."""
        self.handoffs = np.zeros(n, dtype=np.int64)
        self.kv_transfer_s = np.zeros(n)
        self.completed = 0
        self.generated_tokens = 0
        """Output tokens of the completed requests."""
        self.produced_tokens = 0.0
        """Output tokens produced so far, finished requests or not (first tokens and decode steps)."""

    def frame(self) -> pd.DataFrame:
        """The finished requests as a DataFrame with `REQUEST_COLUMNS`."""
        df = pd.DataFrame(
            {
                "request_id": np.arange(len(self.input_tokens)),
                "instance": self.instance,
                "scheduled_s": self.scheduled_s,
                "first_token_s": self.first_token_s,
                "completion_s": self.completion_s,
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "preemptions": self.preemptions,
                "prefill_instance": self.prefill_instance,
                "handoffs": self.handoffs,
                "kv_transfer_s": self.kv_transfer_s,
            },
            columns=[*REQUEST_COLUMNS, "prefill_instance", "handoffs", "kv_transfer_s"],
        )
        return df[np.isfinite(self.completion_s)].reset_index(drop=True)
