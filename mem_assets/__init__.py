"""memtend's Dagster code location (``mem_assets.definitions``) and its ``memtend`` CLI.

Importing the package installs the warning filters every process that loads the project needs
(the CLI, ``dagster dev``'s code server, each run process), before any submodule is imported:
the project uses Dagster preview/beta features on purpose (partitioned asset checks), and jieba
imports the deprecated ``pkg_resources`` — neither is news to whoever runs the pipeline.
"""

import warnings

import dagster as dg

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning, module="jieba")
