"""The core never imports dagster (it must stay usable and testable without it)."""

import subprocess
import sys

import pytest


@pytest.mark.exhaustive
def test_importing_the_core_does_not_import_dagster():
    code = (
        "import sys, pkgutil, importlib, eval_pipelines.core as core\n"
        "for m in pkgutil.walk_packages(core.__path__, 'eval_pipelines.core.'):\n"
        "    importlib.import_module(m.name)\n"
        "import eval_pipelines.storage.holdout\n"
        "for m in ('spec', 'sample', 'classify', 'report', 'checks'):\n"
        "    importlib.import_module('eval_pipelines.stages.holdout_' + m)\n"
        "print('dagster' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
