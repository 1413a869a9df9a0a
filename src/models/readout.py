"""How a classifier turns its hidden states into logits: at the last
position (the task's answer), or at every position (per_position=True, as a
sequence model is used)."""


def read_out(classifier, h_BxLxD, per_position):
  """logits_BxC from the last position, or logits_BxLxC from every one."""
  if per_position:
    return classifier(h_BxLxD)
  return classifier(h_BxLxD[:, -1])
