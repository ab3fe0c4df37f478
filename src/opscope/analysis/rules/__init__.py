"""Rules: advice derived from the other rooms' results, one rule per finding (the room for the advice rules to
come).

Empty for now: it is here so that the new analyses land beside the others instead of in a flat folder.
"""
