"""Dagster assets: thin wrappers that call the stage functions per document."""

import warnings

from dagster import BetaWarning, PreviewWarning

# backfill_policy and pools are marked beta/preview; the project relies on them on purpose.
warnings.filterwarnings("ignore", category=BetaWarning)
warnings.filterwarnings("ignore", category=PreviewWarning)
