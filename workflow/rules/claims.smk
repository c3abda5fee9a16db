# The paper's conclusions, each decided from this configuration's summaries by a rule stated before any
# run (docs/claims.md; the claims' registry: softmax_bottleneck.report.claims): one row per claim with the
# paper's value, ours with its 95 % interval, n and the verdict, as <reports>/claims.{csv,md,html,tex}.
# The HTML page is the report's "Claims" section. Like the tables, it re-renders when the rendering code,
# the banner or a summary changes (a summary showing a layer is written again after its source changes),
# and retrains nothing.

from softmax_bottleneck.report import claims as paper_claims


rule claims:
    """Decide each of the paper's claims from the summaries: consistent, not consistent, undecided, ..."""
    input:
        summaries=[f"{RESULTS}/summary/{file}" for file in paper_claims.REQUIRES],
        code=rendering_code,
    output:
        csv=f"{REPORTS}/claims.csv",
        md=f"{REPORTS}/claims.md",
        tex=f"{REPORTS}/claims.tex",
        html=report(
            f"{REPORTS}/claims.html",
            caption="../report/claims.rst",
            category="Claims",
            labels={"item": "claims"},
        ),
    log:
        f"{LOGS}/claims.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        summary_dir=lambda wildcards: f"{RESULTS}/summary",
        out=lambda wildcards, output: output.csv.removesuffix(".csv"),
        banner=lambda wildcards: BANNER_OPTION,
    shell:
        "python -m softmax_bottleneck claims --summary-dir {params.summary_dir} --out {params.out} "
        "{params.banner} > {log} 2>&1"
