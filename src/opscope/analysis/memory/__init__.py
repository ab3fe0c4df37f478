"""Memory: allocations, peaks and memory traffic over time (the room for the memory analyses to come).

Empty for now: it is here so that the new analyses land beside the others instead of in a flat folder.
"""
