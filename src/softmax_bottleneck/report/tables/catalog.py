"""Which summary files each table reads, and its one-line caption (the workflow builds its rules from these)."""

from __future__ import annotations

#: table name -> summary files (under the summary folder) it reads
REQUIRES: dict[str, list[str]] = {
    "table1": ["ntet.csv"],
    "table2": ["main.csv"],
    "table3": ["frozen.csv"],
    "table4": ["main.csv", "frozen.csv"],
    "table5": ["fair.csv"],
    "table6": ["ntet.csv", "spectra.csv"],
    "sm_table1": ["main.csv"],
    "sm_table2": ["top5.csv"],
    "sm_table3": ["wordsim.csv"],
    "sm_table4": ["mos_k.csv"],
    "sm_table5": ["mos_k.csv"],
    "sm_table10": ["ntet.csv"],
    "sm_table11": ["ntet.csv"],
    "sm_table12": ["mos_dropoutl.csv"],
    "sm_table13": ["wordsim.csv"],
    "sm_table14": ["robustness.csv"],
    "sm_table15": ["robustness.csv"],
    "sm_table16": ["robustness.csv"],
    "sm_table17": ["ntet.csv", "spectra.csv"],
    "sm_table18": ["ntet.csv", "spectra.csv"],
    "figure2_pearson": ["gss_grid.csv"],
    "figure4_wins": ["wordsim.csv"],
}

#: one-line captions of the Markdown renderings
CAPTIONS: dict[str, str] = {
    "table1": "Table 1 (PTB): Press' rank and test-ppl gain over Softmax (Softmax − model), ET-ASGD authors' seed; "
    "MoS rank from its NT-ASGD run as in the paper.",
    "table2": "Table 2: main comparison, ET-ASGD, mean ± sd over all seeds; p-value of a Student t-test "
    "(random seeds) vs Softmax.",
    "table3": "Table 3: LMS-PLIF† (frozen slopes), mean ± sd over all seeds.",
    "table4": "Table 4: test ppl of LMS-PLIF vs LMS-PLIF† over the random seeds, Student t-test.",
    "table5": "Table 5 (PTB): fair comparison MoS† vs Softmax‡, mean ± sd; p-value (MoS† row) of a Student t-test "
    "(the paper's p = 0.62 is from its text).",
    "table6": "Table 6 (= SM Tables 17, 18): Press' rank and ε-effective ranks, ET-ASGD authors'-seed models.",
    "sm_table1": "SM Table 1: test ppl over the random seeds only, p-value of a Student t-test vs Softmax.",
    "sm_table2": "SM Table 2 (PTB): top-5 next-word predictions at the 18 contexts and whether the true token is "
    "among them.",
    "sm_table3": "SM Table 3: Spearman ρ of the tied embeddings on 13 word-similarity benchmarks.",
    "sm_table4": "SM Table 4 (PTB): MoS vs the number of mixtures K (NT-ASGD, authors' seed).",
    "sm_table5": "SM Table 5 (WT2): MoS vs the number of mixtures K (NT-ASGD, authors' seed).",
    "sm_table10": "SM Table 10 (PTB): NT-ASGD vs ET-ASGD, authors' seed.",
    "sm_table11": "SM Table 11 (WT2): NT-ASGD vs ET-ASGD, authors' seed.",
    "sm_table12": "SM Table 12: MoS (K = 15) vs dropout on the MoS layer (dropoutl).",
    "sm_table13": "SM Table 13: benchmark pairs with a word missing from the vocabulary.",
    "sm_table14": "SM Table 14: robustness of Press' rank, Algorithm 1 (reconstruction noise).",
    "sm_table15": "SM Table 15: robustness of Press' rank, Algorithm 2 (additive Gaussian noise of scale c).",
    "sm_table16": "SM Table 16: Press' rank vs ε-effective rank of the noisy matrices of Algorithm 2.",
    "sm_table17": "SM Table 17 (PTB half of Table 6): Press' rank and ε-effective ranks.",
    "sm_table18": "SM Table 18 (WT2 half of Table 6): Press' rank and ε-effective ranks.",
    "figure2_pearson": "Figure 2 (text): Pearson correlation of test ppl and Press' rank over the GSS grid "
    "(the paper gives |r|; the last columns give r of its digitised points).",
    "figure4_wins": "Figure 4: number of the 13 benchmarks on which the row model's ρ beats the column model's.",
}
