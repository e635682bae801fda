"""The drivers' machinery, one job a module (a driver imports the ones it uses):

* :mod:`~experiments.framework.schema`: the typed configuration (:class:`Config`) and the :class:`Driver` record;
* :mod:`~experiments.framework.cli`: absl flags made from the configuration's fields;
* :mod:`~experiments.framework.lifecycle`: ``main``: flags -> run folder -> run -> results, exit codes as a table;
* :mod:`~experiments.framework.fold_data`: a fold's data (folds on disk, the dataset of a recipe, device data);
* :mod:`~experiments.framework.ablation`: the baseline and PFD teacher the ablation drivers build on;
* :mod:`~experiments.framework.rowstore`: the resume store of trained rows;
* :mod:`~experiments.framework.records`: the typed records of a Table 2 run (a row's, a fold's, a loss's results);
* :mod:`~experiments.framework.pairs`: the paired comparisons of a Table 2 run's rows, and each claim's unit;
* :mod:`~experiments.framework.protocol`: a Table 2 run's population, selection and its optimism, re-drawn power;
* :mod:`~experiments.framework.position`: the --position debiasing rows of a run on the team's own logs;
* :mod:`~experiments.framework.deploy`: which model to deploy, chosen on validation, and its serving latency;
* :mod:`~experiments.framework.practice`: what a practitioner's run says beside its table (deploy, PFD search);
* :mod:`~experiments.framework.rundir`: run folders, provenance, the environment a run records;
* :mod:`~experiments.framework.monitor`: progress lines and TensorBoard, as metric writers;
* :mod:`~experiments.framework.outputs`: results.json, table.md and the plot of a run;
* :mod:`~experiments.framework.tabulate`: Markdown tables and their statistics cells;
* :mod:`~experiments.framework.plots`: PNG plots (matplotlib, imported on first use);
* :mod:`~experiments.framework.sequential_runs`: the sequential runs that decide Table 2 on the analogues;
* :mod:`~experiments.framework.drawstore`: each finished draw of such a run, committed as it ends;
* :mod:`~experiments.framework.reported`: the paper's reported figures, which the analogues are calibrated to.

Printing and files live here and in the drivers, never in pfd_jax. Nothing here imports the results page
(experiments.page): a run is the same whatever the page says of it. No driver imports another driver, with one
deliberate exception: experiments.paper.alpha_robustness re-runs experiments.paper.fig3_alpha's driver over re-drawn data.
"""
