"""Data files shipped with opscope (the GPU peak table)."""
