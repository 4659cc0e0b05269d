"""Documents generated from finished results folders only: RESULTS.md (`results_md`), RERANKER.md (`reranker_md`),
the checkpoint verdicts (`checkpoints`) and the notebook build and index (`notebooks`). Nothing here runs a study."""
