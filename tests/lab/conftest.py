"""One quick run per experiment, shared by the tests of that experiment (each writes NAME.png and NAME.json)."""

import json

import pytest

from scratchformer.lab import run_experiment

PNG = b"\x89PNG"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """quick(name) -> (numbers, conclusion) of `lab NAME --quick`, checking the two files it must write."""
    done = {}

    def get(name: str):
        if name not in done:
            out = tmp_path_factory.mktemp(name)
            result = run_experiment(name, out, quick=True)
            assert (out / f"{name}.png").read_bytes()[:4] == PNG
            data = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
            assert data["experiment"] == name and data["quick"] is True
            assert data["conclusion"] == result.conclusion
            done[name] = data["numbers"], data["conclusion"]
        return done[name]

    return get
