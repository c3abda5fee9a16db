"""Analyses of trained models: the test log-P matrix and its rank (Tables 2 and 6, Figure 7), word similarity
(SM Tables 3 and 13, Figure 4), top-5 predictions (Figure 3, SM Table 2), the robustness of Press' rank (SM §5)
and the statistics the paper reports (t-tests, Pearson's r).
"""
