"""What a ranking is worth: IR metrics (`metrics`), top-1 behaviour classes (`behaviour`), and the statistics every
table reports (`stats`: bootstrap CIs, paired permutation tests, multiple-comparison adjustment)."""
