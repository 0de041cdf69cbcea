"""What one pass over a block does; shared by every model's coding loop.

ENCODE codes the block's symbols into a code word; DECODE recovers them from one; LEARN only updates
the model (a block the codec stored or gave to zstandard).  All three run the same loop, so the
model's state after a block is the same whichever mode saw it (LEARN skips only work that serves
the coder, e.g. the ssm model's mixer, which learns from coded probabilities).
"""

ENCODE, DECODE, LEARN = 0, 1, 2
