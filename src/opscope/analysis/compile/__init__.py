"""torch.compile: compiled regions, graph breaks, recompiles and the kernels Inductor generated
(`regions.compile_check`, the data behind `opscope compile-check`; definitions in docs/advice.md)."""
