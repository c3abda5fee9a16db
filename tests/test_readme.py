"""Every shell command in the README's ``bash`` code blocks works exactly as written.

The commands run in a scratch copy of the repository (``../shared`` beside it, the test's venv as
``.venv``), with the working directory at its root, as a user types them after the quick start: in a shell where
the quick start's first line activated ``.venv`` (:data:`ACTIVATE`; nothing of the environment is on the ``PATH``
but what that line puts there):

* Snakemake commands run as dry runs (``-n`` added right after ``snakemake``), except ``snakemake
  plan``, which is cheap and runs for real;
* install chains (``pip install ... && ...``): pip resolves the install (``--dry-run``) in the test's venv, and
  what follows the install runs as above; the test command (install, then pytest) and the activation must be
  lines of ``.ci/run``, so CI executes them;
* commands that need the small scale's results (the report, ``costs``, the log commands) run in
  the slow end-to-end test (tests/test_workflow.py) after it ran the README's small-scale command;
* only the commands that start a real SLURM cluster or need the paper-scale (GPU) outputs are
  skipped, listed in :data:`NEEDS_SLURM_OR_GPUS`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import data_dir, needs_data

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the data folder (tests/conftest.py), linked as ``../shared/data`` beside the scratch copies
MIRROR = data_dir()
VENV = Path(sys.executable).parent.parent

#: commands that need a real SLURM cluster (root daemons) or the paper-scale models (GPU-weeks)
NEEDS_SLURM_OR_GPUS = {
    "STATE=/tmp/slurm-ci/state bash .ci/slurm/start_cluster.sh": "starts a SLURM cluster (tests/test_slurm.py)",
    "STATE=/tmp/slurm-ci/state bash .ci/slurm/stop_cluster.sh": "stops a SLURM cluster (tests/test_slurm.py)",
    "snakemake --report reports/report.html": "needs every paper-scale table and figure (GPU-weeks)",
    "python -m softmax_bottleneck bench --dataset wt2 --variant mos --device cuda --runs 4": "needs a CUDA GPU",
    "for d in ptb wt2; do for v in softmax ss gss lms_plif mos moc; do for p in sgd asgd; do python -m"
    " softmax_bottleneck bench --dataset $d --variant $v --phase $p --device cuda --batches 100 --warmup 10"
    " > results/bench/$d-$v-$p.json; done; done; done": "needs a CUDA GPU (24 paper-scale measurements)",
    "snakemake plan && python -m softmax_bottleneck costs --plan results/plan/training_jobs.csv"
    " --bench results/bench/*.json": "needs the bench files of a GPU (tests/test_costs.py runs costs --bench)",
    # docs/cluster.md: run by hand on the one-node SLURM cluster of .ci/slurm (their output is on the page)
    "srun --gpus=1 --time=10 python -m softmax_bottleneck cuda-check": "a SLURM cluster (run by hand)",
    'sinfo -o "%P %l %G"': "a SLURM cluster (run by hand)",
    "sbatch --time=7-00:00:00 --cpus-per-task=1 --mem=4G --job-name=controller --output=$STUDY/controller-%j.log "
    '--wrap "snakemake --profile profiles/slurm --directory $STUDY --configfile config/config.yaml"': "a SLURM "
    "cluster (run by hand)",
    'squeue --me -o "%.10i %.9T %.10M %k"': "a SLURM cluster (run by hand)",
    "scancel --signal=TERM JOBID": "a running SLURM training job (run by hand)",
    'grep -ho \'"gpu": "[^"]*"\' $STUDY-pilot/results/runs/*/*/*/*/*/metrics.json | sort | uniq -c': "the pilot's "
    "runs trained on a GPU",
    "python -m softmax_bottleneck site-check --profile ~/softmax-site --directory $STUDY --configfile "
    "config/config.yaml": "a SLURM cluster (tests/test_site_check.py runs it on the one-node cluster)",
    "snakemake --profile ~/softmax-site --directory $STUDY --configfile config/config.yaml --sdm conda "
    "--conda-create-envs-only": "conda (not on this project's machines)",
    "snakemake --profile ~/softmax-site --directory $STUDY --configfile config/config.yaml --sdm conda": "conda (not "
    "on this project's machines)",
    "snakemake --profile ~/softmax-site --directory $STUDY --configfile config/config.yaml --sdm apptainer "
    '--apptainer-args="--nv" --config container_image=$PWD/softmax-bottleneck.sif': "a SLURM cluster with Apptainer "
    "(tests/test_container.py runs the smoke check so, Charliecloud standing in for Apptainer)",
    "snakemake --cores 8 --resources gpu=4 --config 'fusion={runs_per_job: 8}'": "the paper's study on 4 GPUs "
    "(GPU-weeks; tests/test_fusion_plan.py plans it dry)",
}
#: commands that need the small scale's results: run by test_small_scale_end_to_end after it
NEEDS_SMALL_SCALE_RESULTS = {
    "tail -f logs/train/ptb/mos/et/seed28/default-*.log",
    "ls -t logs/train/*/*/*/*/*.log | head",
    "snakemake --report reports/small/report.zip --configfile config/small.yaml",
    "python -m softmax_bottleneck costs --benchmarks benchmarks",
    "python -m softmax_bottleneck costs --benchmarks benchmarks --out reports/costs.md",
    "snakemake plan && python -m softmax_bottleneck costs --benchmarks benchmarks"
    " --plan results/plan/training_jobs.csv",
    "snakemake --report reports/small/preview/report.html preview --configfile config/small.yaml",
}
#: the README's command that runs the small scale (it downloads the data); the slow end-to-end test runs it for
#: real with the mirror appended, since no machine of the test suite reaches the download hosts
SMALL_SCALE = "snakemake --cores 2 --configfile config/small.yaml"
MIRROR_OPTION = "--config data_mirror=../shared/data"
#: the quick start's first line: the environment every other command runs in (:func:`run_in` runs it first; run
#: itself, it would rebuild the test's venv, which .venv links to)
ACTIVATE = "python3 -m venv .venv && source .venv/bin/activate"
#: the smoke check (config/smoke.yaml: two tables in a minute or two); tests/test_smoke.py runs it with the mirror
SMOKE = "snakemake table2 table6 --cores 2 --configfile config/smoke.yaml"
#: the quick start's install and smoke check, and its install and tests
QUICK_START = f"pip install -e . && {SMOKE}"
TEST_COMMAND = "pip install -e '.[test]' && pip install ./examples/taylor_softmax && pytest"
#: commands that need the network beyond the package registries
CPU_TORCH = "pip install --timeout 15 --retries 2 torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
NEEDS_NETWORK = {
    CPU_TORCH: "PyTorch's own package index (a CPU-only machine's first step)",
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126": "PyTorch's own index",
}
#: docs/fused-training.md's example: three small PTB runs trained fused (the data the quick start fetched)
FUSED_EXAMPLE = (
    "python -m softmax_bottleneck train-fused --dataset ptb --run softmax et 141 runs/softmax-et-141 --run softmax nt"
    " 142 runs/softmax-nt-142 --run ss et 141 runs/ss-et-141 switch_epoch=1 --set nemb=32 --set nhid=64 --set"
    " nhidlast=32 --set epochs=2 --set train_tokens=20000 --set valid_tokens=5000 --set test_tokens=5000"
)
#: commands of docs/ that need what only another test sets up; each runs there
RUN_ELSEWHERE = {
    "python -m softmax_bottleneck check-layer taylor": "tests/test_plugin_example.py (the example plug-in installed)",
    "python -m softmax_bottleneck describe --dataset ptb --variant taylor --set taylor_scale=2": "tests/test_plugin_example.py",  # noqa: E501
    "python -m softmax_bottleneck train --dataset ptb --variant taylor --schedule et --out runs/taylor --set epochs=1": "tests/test_plugin_example.py",  # noqa: E501
    "snakemake sweep_taylor_scale --configfile config/small.yaml examples/taylor_softmax/sweep.yaml": "tests/test_sweeps.py (the example plug-in installed)",  # noqa: E501
    "snakemake -n --configfile config/small.yaml mine.yaml": "tests/test_plugin_example.py (the example installed)",
    "python -m softmax_bottleneck plan --config config/small.yaml --config mine.yaml": "tests/test_plugin_example.py",
    "python -m softmax_bottleneck sweep taylor_scale --summary-dir results/summary --out-table reports/tables/"
    "sweep_taylor_scale --out-figure reports/figures/sweep_taylor_scale": "tests/test_sweeps.py (a sweep's summary)",
    "pip install -e '.[hf]'": "changes the environment; the test extra holds the hf extra already",
    "python -m softmax_bottleneck analyze-lm --model ~/models/gpt2 --text resources/data/ptb/test.txt --rows full "
    "--memory-budget-gb 24 --out-json gpt2-ptb.json --out-spectrum gpt2-ptb-spectrum.csv": "tests/test_analyze_lm.py "
    "(a tiny local GPT-2)",
    "python -m softmax_bottleneck lm-report gpt2=gpt2-ptb.json --out-table lm --out-figure lm": "tests/test_analyze_lm.py",  # noqa: E501
    "python -m softmax_bottleneck rank rows.npy --spectrum-out spectrum.csv > rank.json": "tests/test_rank.py (after "
    "the guide's Python writes rows.npy)",
    "python -m softmax_bottleneck table table2 --summary-dir results/summary --out reports/tables/table2": "tests/test_tables.py (paper-scale summaries)",  # noqa: E501
    "snakemake --unlock --profile profiles/slurm --directory $STUDY --configfile config/config.yaml": "tests/test_slurm.py (a controller killed, --unlock, the same command)",  # noqa: E501
    "snakemake --profile profiles/slurm --directory $STUDY-pilot --configfile config/gpu-smoke.yaml": "tests/test_slurm.py (the pilot, tiny, through the profile)",  # noqa: E501
    "python -m softmax_bottleneck status --config config/gpu-smoke.yaml --directory $STUDY-pilot": "tests/test_slurm.py (status of the pilot's folder)",  # noqa: E501
    "python -m softmax_bottleneck figure figure2 --summary-dir results/summary --out reports/figures/figure2": "tests/test_figures.py (paper-scale summaries)",  # noqa: E501
    "snakemake claims --configfile config/small.yaml": "tests/test_workflow.py (the small scale's rule all makes the page)",  # noqa: E501
    "python -m softmax_bottleneck claims --paper --out reports/claims-paper": "tests/test_claims.py (in-process)",
    "python -m softmax_bottleneck claims --seeds": "tests/test_claims.py (in-process)",
    "python -m softmax_bottleneck claims --seeds --claim table4_ptb --claim figure2_all_ptb": "tests/test_claims.py (in-process)",  # noqa: E501
    "cp -r profiles/slurm ~/softmax-site": "tests/test_site_check.py (the profile copied outside the checkout)",
    "apptainer build softmax-bottleneck.sif envs/softmax-bottleneck.def": "tests/test_container.py (Charliecloud "
    "standing in for Apptainer)",
    "apptainer build softmax-bottleneck-taylor.sif examples/taylor_softmax/apptainer.def": "tests/test_container.py "
    "(Charliecloud standing in for Apptainer)",
    FUSED_EXAMPLE: "tests/test_fused_trainer.py (with the fetched PTB; each run checked against its solo training)",
    "snakemake --configfile /path/to/softmax-bottleneck/config/config.yaml --cores 8 my_figure7_copy": "tests/"
    "test_module.py (the study as a module of a workflow outside the checkout)",
}
#: where the commands are: the README, then every page of docs/
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
INSTALL = re.compile(r"^(?P<pip>pip install [^&]+?)\s*(?:&& (?P<rest>.+))?$")


def readme_commands(text: str | None = None) -> list[str]:
    """Shell commands of the ```bash blocks of the README and docs/ (or of ``text``): continuation lines joined,
    comments dropped, in order."""
    if text is None:
        text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    commands: list[str] = []
    for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            line = re.sub(r"\s+", " ", line)
            if line and not line.startswith("#") and line not in commands:
                commands.append(line)
    return commands


def scratch_repo(dest: Path) -> Path:
    """A copy of the repository's workflow files and ``src`` at ``dest/repo``, with ``../shared/data`` (a link to the
    data folder) and ``.venv``.

    ``src`` is copied, not linked, so that a test may edit the package's code there (the rules run this copy).
    """
    repo = dest / "repo"
    repo.mkdir(parents=True)
    for name in ("Snakefile", "workflow", "config", "profiles", "envs", ".ci", "README.md", "pyproject.toml"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, repo / name)
    shutil.copy(ROOT / "requirements.lock", repo)
    shutil.copytree(ROOT / "src", repo / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (repo / ".venv").symlink_to(VENV)
    (dest / "shared").mkdir()
    (dest / "shared" / "data").symlink_to(MIRROR)
    return repo


def dry(command: str) -> str:
    """``snakemake ...`` -> ``snakemake -n ...`` (every snakemake of a chain), except ``snakemake plan``."""
    if re.search(r"(^| )(-n|--dry-run)( |$)", command):
        return command
    return re.sub(r"(^|&& )((?:\.venv/bin/)?snakemake)(?! plan\b)", r"\1\2 -n", command)


def user_shell() -> dict:
    """The environment of a user's terminal: this one's, without the test's venv on the ``PATH`` (the commands get it
    from :data:`ACTIVATE`, as a user does)."""
    hidden = {str(VENV / "bin"), str(Path(sys.executable).parent)}
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p not in hidden)
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    return dict(env, PATH=path)


def activated(command: str) -> str:
    """``command`` in a shell where the quick start activated the environment (what follows ``&&`` in
    :data:`ACTIVATE`)."""
    return f"{ACTIVATE.split(' && ', 1)[1]} && {command}"


def run_in(repo: Path, command: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``command`` as a user pastes it after the quick start, in ``repo``; ``$STUDY`` (docs/cluster.md's working
    directory on another file system) a folder beside the repository."""
    env = dict(user_shell(), STUDY=str(repo.parent / "study"))
    return subprocess.run(["bash", "-c", activated(command)], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def test_readme_has_the_fresh_machine_commands_on_top():
    """The quick start: the environment made and activated, the optional CPU-only PyTorch step, install + small scale
    (downloading), install + tests; none of them, and none after them, names a program inside .venv."""
    top = readme_commands(README.read_text(encoding="utf-8").split("## Running the study")[0])
    assert top == [ACTIVATE, CPU_TORCH, QUICK_START, SMALL_SCALE, TEST_COMMAND]
    assert "data_mirror" not in QUICK_START  # downloads by default
    assert not [c for c in readme_commands() if ".venv/bin/" in c and c != ACTIVATE]


def test_without_the_activation_the_commands_do_not_find_the_package(tmp_path):
    """The harness hides the test's environment: the README's commands find the package only through the quick
    start's activation."""
    result = subprocess.run(["bash", "-c", "python3 -c 'import softmax_bottleneck'"], cwd=tmp_path,
                            env=dict(user_shell(), PYTHONPATH=""), capture_output=True, text=True)  # fmt: skip
    assert result.returncode != 0 and "No module named 'softmax_bottleneck'" in result.stderr


def test_readme_is_short_and_the_docs_it_links_exist():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for target in re.findall(r"\]\(((?:docs|config|examples)/[^)#]+|LICENSE|BENCHMARKS\.md)(?:#[^)]*)?\)", text):
        assert (ROOT / target).exists(), target


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ACTIVATE in ci and TEST_COMMAND in ci, "the README's activation and test command are not lines of .ci/run"
    assert ci.index(ACTIVATE) < ci.index(TEST_COMMAND)


def test_every_listed_command_is_in_the_readme():
    commands = set(readme_commands())
    listed = set(NEEDS_SLURM_OR_GPUS) | NEEDS_SMALL_SCALE_RESULTS | set(NEEDS_NETWORK) | set(RUN_ELSEWHERE)
    assert listed <= commands, listed - commands
    assert {ACTIVATE, QUICK_START, SMALL_SCALE, TEST_COMMAND} <= commands


def _project() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


PROJECT = _project()


def extra_requirements(extra: str) -> list[str]:
    """The requirements of one extra of pyproject.toml, an extra of the project itself (``softmax-bottleneck[hf]``)
    replaced by its own requirements."""
    out = []
    for requirement in PROJECT["optional-dependencies"][extra]:
        own = re.fullmatch(rf"{PROJECT['name']}\[([\w,]+)\]", requirement)
        out += [r for name in own.group(1).split(",") for r in extra_requirements(name)] if own else [requirement]
    return out


#: what the study itself does not need: analyze-lm's Hugging Face libraries and the test suite's style checkers
NOT_FOR_THE_STUDY = {"transformers", "tokenizers", "ruff", "black", "snakefmt", "import-linter", "pytest"}


def test_installing_the_package_installs_neither_transformers_nor_a_linter():
    """``pip install -e .`` (the quick start) installs the study's dependencies and what they need, resolved from the
    installed distributions' own metadata; transformers comes with the hf extra, the checkers with the test extra
    (which holds the hf extra: the suite tests analyze-lm)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    def closure(requirements) -> set[str]:
        seen, todo = set(), [Requirement(r) for r in requirements]
        while todo:
            requirement = todo.pop()
            name = re.sub(r"[-_.]+", "-", requirement.name).lower()
            if name in seen or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
                continue
            seen.add(name)
            try:
                todo += [Requirement(r) for r in requires(name) or []]
            except PackageNotFoundError:  # an optional platform package that is not installed here
                continue
        return seen

    study = closure(PROJECT["dependencies"])
    assert {"torch", "snakemake", "snakemake-executor-plugin-slurm"} <= study
    assert not study & NOT_FOR_THE_STUDY, study & NOT_FOR_THE_STUDY
    assert {"transformers", "tokenizers"} <= closure(extra_requirements("hf"))
    assert {"ruff", "snakefmt", "black", "import-linter", "transformers"} <= closure(extra_requirements("test"))


def test_the_lock_pins_every_dependency_and_the_conda_env_agrees():
    """requirements.lock pins every declared dependency (and the test extras) to one version, and
    envs/softmax-bottleneck.yaml pins the same versions (whether the lock installs is checked by
    test_readme_command_works_as_written, with pip --dry-run)."""

    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    lines = (ROOT / "requirements.lock").read_text().splitlines()
    pins = {norm(k): v for k, v in (line.split("==") for line in lines if line and not line.startswith("#"))}
    declared = [*PROJECT["dependencies"], *extra_requirements("test")]
    names = {norm(re.match(r"[A-Za-z0-9_.-]+", d).group(0)) for d in declared}
    assert names <= set(pins), names - set(pins)
    env = (ROOT / "envs" / "softmax-bottleneck.yaml").read_text()
    conda_pins = dict(re.findall(r"^\s+- ([A-Za-z0-9_.-]+)==(\S+)$", env, flags=re.M))
    assert conda_pins and all(pins[norm(k)] == v for k, v in conda_pins.items()), conda_pins
    not_in_rules = {
        "snakemake",
        "snakemake-executor-plugin-slurm",
        "pytest",
        "pytest-xdist",
        "snakefmt",
        "ruff",
        "import-linter",
    }
    assert set(map(norm, conda_pins)) >= names - not_in_rules  # what the rules' commands import


def test_the_cpu_torch_line_pins_the_locked_torch_and_gives_up_soon():
    """The README's CPU-torch line installs the torch of requirements.lock (the one CI pins), and gives up after a
    bounded wait where PyTorch's index does not answer (pip's defaults retry 5 times)."""
    assert CPU_TORCH in readme_commands()
    lock = dict(line.split("==") for line in (ROOT / "requirements.lock").read_text().splitlines() if "==" in line)
    ci = (ROOT / ".ci" / "constraints.txt").read_text()
    assert f"torch=={lock['torch']} " in CPU_TORCH and f"torch=={lock['torch']}" in ci.split()
    timeout, retries = (int(re.search(rf"--{flag} (\d+)", CPU_TORCH).group(1)) for flag in ("timeout", "retries"))
    assert timeout * (retries + 1) <= 60


@needs_data
def test_after_the_quick_start_the_tests_read_the_data_it_verified(tmp_path, monkeypatch):
    """With no variable and nothing beside the checkout, the tests read the checkout's resources/data, where the
    quick start fetched every file with its pinned SHA-256; a folder missing a file or holding one that differs is
    not used."""
    import conftest

    from softmax_bottleneck.corpora.download import FILES

    monkeypatch.delenv(conftest.DATA_VARIABLE, raising=False)
    monkeypatch.setattr(conftest, "BESIDE", tmp_path / "no-shared-data")
    folders = {}
    for case in ("fetched", "edited", "partial"):
        folders[case] = tmp_path / case / "resources" / "data"
        for name in FILES:
            (folders[case] / name).parent.mkdir(parents=True, exist_ok=True)
            (folders[case] / name).symlink_to(MIRROR / name)
    edited = folders["edited"] / "ptb" / "valid.txt"
    edited.unlink()
    edited.write_bytes((MIRROR / "ptb" / "valid.txt").read_bytes().replace(b" the ", b" teh ", 1))
    (folders["partial"] / "word-sim" / "RW-STANFORD.txt").unlink()
    for case, expected in (("fetched", folders["fetched"]), ("edited", conftest.CACHE), ("partial", conftest.CACHE)):
        monkeypatch.setattr(conftest, "CHECKOUT", folders[case])
        assert conftest.data_dir() == expected, case


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return scratch_repo(tmp_path_factory.mktemp("readme"))


FAST = [
    c
    for c in readme_commands()
    if c not in NEEDS_SLURM_OR_GPUS
    and c not in NEEDS_SMALL_SCALE_RESULTS
    and c not in NEEDS_NETWORK
    and c not in RUN_ELSEWHERE
    and c not in (ACTIVATE, TEST_COMMAND)
]
assert not [c for c in FAST if "-m venv" in c], "a command that makes an environment would rebuild the test's venv"


@needs_data
@pytest.mark.parametrize("command", FAST)
def test_readme_command_works_as_written(repo, command):
    install = INSTALL.match(command)
    if install:  # the venv is this test's (.venv); pip resolves the install without changing it
        pip = install.group("pip").replace("pip install", "pip install --dry-run", 1)
        resolved = run_in(repo, pip)
        assert resolved.returncode == 0, f"{pip}\n{(resolved.stdout + resolved.stderr)[-4000:]}"
        if not install.group("rest"):
            return
        command = install.group("rest")
    result = run_in(repo, dry(command))
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{dry(command)}\n{output[-4000:]}"
    assert "Traceback" not in output
    if command == "snakemake plan":
        assert "training jobs" in result.stdout  # the plan's summary reaches the terminal


def run_small_scale_commands(repo: Path) -> None:
    """The README commands that need the small scale's results, in a repo where it has run."""
    for command in sorted(NEEDS_SMALL_SCALE_RESULTS):
        if command.startswith("tail -f"):
            result = run_in(repo, f"timeout 3 {command}")
            assert result.returncode == 124 and "epoch" in result.stdout, result.stdout[-2000:] + result.stderr
            continue
        result = run_in(repo, command)
        assert result.returncode == 0, f"{command}\n{(result.stdout + result.stderr)[-4000:]}"
        assert "Traceback" not in result.stdout + result.stderr


def test_the_quick_start_outside_this_layout_downloads_or_says_how_to_work_offline(tmp_path):
    """A clone with no ../shared: the quick start's command fetches from the public URLs; where those cannot be
    reached it stops at the first download, not retried, with one error block whose log says how to work offline
    (data_mirror)."""
    from softmax_bottleneck.corpora.download import FILES

    repo = tmp_path / "clone"
    repo.mkdir()
    for name in ("Snakefile", "workflow", "config", "profiles", "envs"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, repo / name)
    shutil.copytree(ROOT / "src", repo / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (repo / ".venv").symlink_to(VENV)
    targets = [f"resources/data/{path}" for path in FILES]  # the quick start's first jobs are the downloads
    command = SMALL_SCALE.replace("snakemake", f"snakemake {' '.join(targets)}", 1)  # targets before --configfile
    result = run_in(repo, command, timeout=600)
    output = result.stdout + result.stderr
    logs = [path.read_text() for path in (repo / "logs").glob("fetch_*/*.log")]
    if result.returncode == 0:  # this machine reaches the download hosts
        assert len(logs) == 15 and all("verified" in log for log in logs)
    else:
        assert output.count("Error in rule") == 1 and "Trying to restart" not in output, output[-4000:]
        assert len(logs) == 1 and "every source failed" in logs[0] and "--config data_mirror=DIR" in logs[0], logs
        assert "--config data_mirror=DIR" in output  # the failed job's log, shown in the terminal
        assert not [path for path in (repo / "resources").rglob("*") if path.is_file()]


# --------------------------------------------------------------------------------------------- citing
def bibtex_entries(cff: dict) -> list[str]:
    """The README's BibTeX entries, built from CITATION.cff: the study it reproduces (its first reference, an
    ``@article`` of the AAAI proceedings as AAAI's own site exports it), then this reproduction (``@misc``, which
    plain BibTeX styles know: title, authors, version, licence)."""

    def entry(kind: str, key: str, fields: dict[str, str]) -> str:
        width = max(map(len, fields))
        lines = [f"  {name:<{width}} = {{{value}}}" for name, value in fields.items()]
        return f"@{kind}{{{key},\n" + ",\n".join(lines) + "\n}"

    def names(authors: list[dict]) -> str:
        return " and ".join(
            f"{a['family-names']}, {a['given-names']}" if "family-names" in a else f"{{{a['name']}}}" for a in authors
        )

    study = cff["references"][0]
    word = next(w for w in study["title"].split() if w.lower() not in ("on", "the", "a", "of"))
    study_fields = {
        "title": study["title"],
        "author": names(study["authors"]),
        "journal": study["journal"],
        "volume": str(study["volume"]),
        "number": str(study["issue"]),
        "pages": f"{study['start']}--{study['end']}",
        "year": str(study["year"]),
        "doi": study["doi"],
    }
    ours = {
        "title": f"{{{cff['title']}}}",
        "author": names(cff["authors"]),
        "note": f"Version {cff['version']}; Snakemake workflow and Python package; {cff['license']} License",
    }
    if "url" in cff or "repository-code" in cff:
        ours["url"] = cff.get("repository-code", cff.get("url"))
    if "doi" in cff:
        ours["doi"] = cff["doi"]
    key = cff["title"].split(":")[0].replace("-", "_") + "_workflow"
    study_key = f"{study['authors'][0]['family-names'].lower()}{study['year']}{word.lower()}"
    return [entry("article", study_key, study_fields), entry("misc", key, ours)]


def _cff() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def test_citation_cff_names_authors_and_the_packages_version():
    """CITATION.cff: format 1.2.0, authors, the version of pyproject.toml and of the package."""
    import tomllib

    from softmax_bottleneck import __version__

    cff = _cff()
    assert cff["cff-version"] == "1.2.0" and cff["authors"] and cff["title"] and cff["license"] == "MIT"
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cff["version"] == version == __version__


def test_the_readmes_bibtex_is_built_from_citation_cff():
    blocks = re.findall(r"^```bibtex\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.M | re.S)
    assert [b.strip() for b in blocks] == bibtex_entries(_cff())


@pytest.mark.skipif(not (shutil.which("pdflatex") and shutil.which("bibtex")), reason="no pdflatex and bibtex")
def test_the_readmes_bibtex_gives_no_bibtex_warning(tmp_path):
    """Both entries, cited with a plain style, pass BibTeX without a warning (no missing author or title)."""
    entries = bibtex_entries(_cff())
    keys = [re.match(r"@\w+\{([^,]+),", e).group(1) for e in entries]
    (tmp_path / "refs.bib").write_text("\n\n".join(entries) + "\n", encoding="utf-8")
    (tmp_path / "doc.tex").write_text(
        "\\documentclass{article}\\begin{document}\\nocite{" + ",".join(keys) + "}"
        "\\bibliographystyle{plain}\\bibliography{refs}\\end{document}\n",
        encoding="utf-8",
    )
    latex = subprocess.run(["pdflatex", "-interaction=nonstopmode", "doc.tex"], cwd=tmp_path, capture_output=True)
    assert latex.returncode == 0, latex.stdout[-2000:]
    bibtex = subprocess.run(["bibtex", "doc"], cwd=tmp_path, capture_output=True, text=True)
    assert bibtex.returncode == 0 and "Warning" not in bibtex.stdout, bibtex.stdout
    assert (tmp_path / "doc.bbl").read_text().count("\\bibitem") == 2
