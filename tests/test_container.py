"""The container route (docs/cluster.md, "Software on the nodes"): every job of the study in the image of
``envs/softmax-bottleneck.def``, run by ``snakemake --sdm apptainer --config container_image=IMAGE``.

Apptainer is not on this project's machines (nor in Debian 12); Charliecloud, an unprivileged container runtime of
the same kind, stands in for it (``tests/container/``): ``build_image.py`` builds the definition's sections on a
Debian 12 root file system with Python 3.11 (the Debian and Python of its base image), and ``apptainer`` runs the
two calls Snakemake makes (``--version``; ``exec --home WORKDIR ... IMAGE sh -c COMMAND``) with ``ch-run``, giving
the command Apptainer's environment: the host's, but ``PATH``, which is the image's. What this checks is the
workflow's side: the image holds all the jobs need, the jobs find the package and the data through the binds the
workflow gives (``APPTAINER_BIND``), and what they train equals the same check run without the image, bit for bit.

The image build needs root, ``debootstrap`` and ``charliecloud`` (Debian's packages; ``.ci/run`` installs them) and
the package registries (about two minutes); without them the long test skips, saying why.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import needs_data
from test_readme import MIRROR_OPTION, SMOKE, run_in, scratch_repo

from softmax_bottleneck.cluster import container

ROOT = Path(__file__).resolve().parents[1]
STAND_IN = ROOT / "tests" / "container"
sys.path.insert(0, str(STAND_IN))

import build_image  # noqa: E402  (tests/container/, the stand-in of `apptainer build`)

DEFINITION = Path("envs/softmax-bottleneck.def")
#: the tests that use the image share one worker (pytest-xdist): the image is built once, not once per worker
IMAGE_GROUP = pytest.mark.xdist_group("container-image")
PLUGIN_DEFINITION = Path("examples/taylor_softmax/apptainer.def")


def _missing_tools() -> str | None:
    if os.geteuid() != 0:
        return "the image build (debootstrap) needs root"
    missing = [tool for tool in ("debootstrap", "ch-run") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install debootstrap charliecloud)"
    return None


@pytest.fixture(scope="module")
def build_root(tmp_path_factory) -> Path:
    """A folder laid out as the checkout's root, where the docs' ``apptainer build`` commands run and leave their
    images."""
    why = _missing_tools()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("build")
    for name in ("envs", "examples", "requirements.lock"):
        (root / name).symlink_to(ROOT / name)
    return root


def _network() -> tuple[str, ...]:
    """What a build reads of this machine to reach the package registries as its pip does: the certificates and the
    local wheel folders (the CPU build of torch)."""
    folders = [p for p in os.environ.get("PIP_FIND_LINKS", "").split() if os.path.isdir(p)]
    return tuple(p for p in ["/etc/ssl/certs", *folders] if os.path.isdir(p))


#: the build's environment: this one's but a constraints file of the checkout (.ci/run's), which the image does not
#: see and which pins nothing requirements.lock does not
BUILD_ENV = {key: value for key, value in os.environ.items() if key != "PIP_CONSTRAINT"}


@pytest.fixture(scope="module")
def image(build_root, tmp_path_factory) -> Path:
    """``apptainer build softmax-bottleneck.sif envs/softmax-bottleneck.def``."""
    base = build_image.base_rootfs(tmp_path_factory.mktemp("base") / "rootfs")
    with contextlib.chdir(build_root):
        return build_image.build(
            DEFINITION, build_root / "softmax-bottleneck.sif", base=base, binds=_network(), env=BUILD_ENV
        )


@pytest.fixture(scope="module")
def taylor_image(image, build_root) -> Path:
    """``apptainer build softmax-bottleneck-taylor.sif examples/taylor_softmax/apptainer.def``: the plug-in layer in an
    image of its own on the first."""
    with contextlib.chdir(build_root):
        return build_image.build(
            PLUGIN_DEFINITION, build_root / "softmax-bottleneck-taylor.sif", binds=_network(), env=BUILD_ENV
        )


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """One checkout for the study without an image (the README's way), shared by the tests: each adds the runs of
    its configuration there, so a run that two tests train in an image is trained once outside it."""
    return scratch_repo(tmp_path_factory.mktemp("outside"))


def _stand_in(folder: Path) -> str:
    """The start of a command line that puts the stand-in first on the ``PATH``, as Apptainer is on a cluster's, and
    has it log each call to ``folder/apptainer.log``."""
    return f"export PATH={STAND_IN}:$PATH APPTAINER_STAND_IN_LOG={folder / 'apptainer.log'} && "


def _smoke_in(image: Path, tmp_path: Path, outside: Path, *configs: Path) -> tuple[Path, list[str]]:
    """The smoke check (and ``configs`` on top) as docs/cluster.md runs the study, in ``$STUDY`` beside the
    checkout (a job sees the package and the data mirror only through the binds the workflow gives), every job in
    ``image``; then the same without the image in the checkout ``outside``, which trains only the runs it lacks.
    Returns the study's folder and the stand-in's calls."""
    repo = scratch_repo(tmp_path / "inside")
    inside = repo.parent / "study"  # run_in's $STUDY
    files = "".join(f" {c}" for c in configs)
    image_option = f"container_image={image} --sdm apptainer"
    result = run_in(repo, f"{_stand_in(tmp_path)}{SMOKE}{files} --directory $STUDY {MIRROR_OPTION} {image_option}")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert re.search(r"(\d+) of \1 steps \(100%\) done", output), output[-3000:]
    # the image is no part of a run's identity: without it, nothing is to be done
    again = run_in(repo, f"{SMOKE}{files} -n --directory $STUDY {MIRROR_OPTION}")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]
    plain = run_in(outside, f"{SMOKE}{files} {MIRROR_OPTION}")
    assert plain.returncode == 0, (plain.stdout + plain.stderr)[-6000:]
    return inside, (tmp_path / "apptainer.log").read_text().splitlines()


def _containers(study: Path) -> set[str]:
    """The images the study's trainings record they ran in."""
    return {
        json.loads(metrics.read_text())["environment"]["container"]
        for metrics in (study / "results" / "runs").rglob("metrics.json")
        if ".resume" not in metrics.parts
    }


def _outputs(repo: Path) -> dict[str, bytes]:
    """Every trained model and the test-set metrics of each run, by run folder (relative to ``repo``)."""
    found = {}
    for model in sorted((repo / "results" / "runs").rglob("model.pt")):
        if ".resume" not in model.parts:
            run = str(model.parent.relative_to(repo))
            found[run] = model.read_bytes()
            metrics = json.loads((model.parent / "metrics.json").read_text())
            found[f"{run}: test"] = json.dumps({k: v for k, v in metrics.items() if k.startswith("test")}).encode()
    return found


@pytest.mark.long
@IMAGE_GROUP
@needs_data
def test_every_job_runs_in_the_image_and_trains_what_it_trains_without(image, outside, tmp_path):
    inside, ran = _smoke_in(image, tmp_path, outside)
    assert len(ran) == 13 and all(line.startswith(f"apptainer exec {image} ") for line in ran), ran
    assert _containers(inside) == {str(image)}
    trained = _outputs(inside)
    assert len(trained) == 4 and trained.items() <= _outputs(outside).items()
    for name in ("table2", "table6"):
        assert (inside / "reports" / "smoke" / "tables" / f"{name}.md").is_file(), name


@pytest.mark.long
@IMAGE_GROUP
@needs_data
def test_a_plug_in_layer_trains_in_an_image_of_its_own(image, taylor_image, outside, tmp_path):
    """examples/taylor_softmax/apptainer.def: the plug-in installed on the first image; its runs, and the paper's
    layers' beside them, train in it as they do without. In the first image, which lacks it, its conformance check
    stops the study before any training, in one line naming the layer."""
    pytest.importorskip("taylor_softmax", reason="the example plug-in layer is not installed (README's test command)")
    mine = tmp_path / "mine.yaml"
    mine.write_text("experiments:\n  main: {variants: [softmax, mos, taylor]}\n")
    repo = scratch_repo(tmp_path / "without")
    command = f"{_stand_in(repo.parent)}{SMOKE} {mine} {MIRROR_OPTION} container_image={image} --sdm apptainer"
    lacking = run_in(repo, command)
    assert lacking.returncode != 0
    check = (repo / "logs" / "check_layer" / "taylor.log").read_text().splitlines()
    assert check[-1].startswith("check-layer: unknown output layer 'taylor'; registered: softmax, "), check
    assert not (repo / "results" / "runs" / "ptb" / "taylor").exists()
    inside, ran = _smoke_in(taylor_image, tmp_path, outside, mine)
    assert ran and all(line.startswith(f"apptainer exec {taylor_image} ") for line in ran), ran
    assert any("check-layer" in line and "taylor" in line for line in ran), ran
    assert _containers(inside) == {str(taylor_image)}
    trained = _outputs(inside)
    assert len(trained) == 6 and any("/taylor/" in run for run in trained)
    assert trained.items() <= _outputs(outside).items()


@needs_data
def test_an_image_that_is_not_there_stops_the_study_in_one_line(tmp_path):
    repo = scratch_repo(tmp_path)
    result = run_in(repo, f"{SMOKE} -n {MIRROR_OPTION} container_image=missing.sif --sdm apptainer")
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "container_image" in line]
    assert lines == [
        f"container_image: 'missing.sif' does not exist (from {repo}): build it with `apptainer build "
        "softmax-bottleneck.sif envs/softmax-bottleneck.def` (docs/cluster.md)"
    ], result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_binds_name_the_folders_a_link_points_to_and_refuse_what_apptainer_cannot_bind(tmp_path, monkeypatch):
    src, data = tmp_path / "checkout" / "src", tmp_path / "data"
    src.mkdir(parents=True)
    data.mkdir()
    (tmp_path / "mirror").symlink_to(data)
    assert container.binds(str(src), str(tmp_path / "mirror")) == [f"{src}:{src}:ro", f"{data}:{data}:ro"]
    assert container.binds(str(src), None) == [f"{src}:{src}:ro"]
    # the jobs inherit them after the user's own binds, and name the mirror by its resolved path
    monkeypatch.setenv("APPTAINER_BIND", "/scratch")
    assert container.bind_for_jobs(str(src), str(tmp_path / "mirror")) == str(data)
    assert os.environ["APPTAINER_BIND"] == f"/scratch,{src}:{src}:ro,{data}:{data}:ro"
    container.bind_for_jobs(str(src), str(tmp_path / "mirror"))  # a cluster job's Snakemake reads the workflow again
    assert os.environ["APPTAINER_BIND"] == f"/scratch,{src}:{src}:ro,{data}:{data}:ro"
    odd = tmp_path / "a,b"
    odd.mkdir()
    with pytest.raises(SystemExit, match=r"holds ',' and cannot be bound"):
        container.binds(str(src), str(odd))


def test_the_definition_installs_the_lock_and_runs_no_code_of_this_package():
    """The image's software is requirements.lock, as envs/softmax-bottleneck.yaml's is; the package's code comes
    from the checkout (bound), never copied into the image, so an image cannot run stale code."""
    header, parts = build_image.sections((ROOT / DEFINITION).read_text())
    assert (header["Bootstrap"], header["From"]) == build_image.BASE
    assert parts["files"].split() == ["requirements.lock", "/opt/softmax-bottleneck/requirements.lock"]
    assert "-r /opt/softmax-bottleneck/requirements.lock" in parts["post"]
    assert "src" not in parts["files"] and "pip install -e" not in parts["post"]
