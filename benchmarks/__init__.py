"""asv benchmarks (asv.conf.json: benchmark_dir). Each module is one family of benchmarks;
importing a module must be cheap and free of side effects beyond what asv needs."""
