"""Efficiency: achieved against possible throughput (the room for the efficiency analyses to come).

Empty for now: it is here so that the new analyses land beside the others instead of in a flat folder.
"""
