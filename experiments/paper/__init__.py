"""The paper's results: a driver per table or figure, and the checks that go with them (Table 2's power, Section 5's
theorems, Table 1's data summary), each writing results/<driver>/. DRIVERS is the page's order;
tests/test_layers.py checks that it names exactly the drivers of this folder."""
DRIVERS = ("table2", "power", "table3_logs", "table3_sparsity", "theory", "fig3_alpha", "alpha_robustness",
           "fig4_sparsity", "fig5_correlation", "table5_positive_groups", "table6_imputation", "pfd_teacher_loss",
           "data_summary")
