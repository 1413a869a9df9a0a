"""Measurements on a trained model, jittable, per seed (the trainer vmaps them).

Shape legend: B batch, L length, D width, H heads, C classes.
"""

import jax
import jax.numpy as jnp


def entropy(p, axis=-1):
  """Shannon entropy in nats; 0 log 0 = 0."""
  return -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0),
                  axis=axis)


def last_query_attention(model, tokens_BxL):
  """The last layer's weights from the last position's query, att_BxHxL."""
  logits_BxC, aux = model(tokens_BxL)
  return logits_BxC, aux['attention'][-1][:, :, -1, :]


def accuracy(model, tokens_BxL, labels_B):
  """The accuracy alone, for a model with no weights to probe."""
  logits, _ = model(tokens_BxL)
  return {'accuracy': (jnp.argmax(logits, -1) == labels_B).mean()}


def class_mean(x_B, mask_B):
  """Mean of x over the strings where mask holds (0 if none); x may have
  trailing axes."""
  w = mask_B.astype(jnp.float32).reshape(mask_B.shape + (1,) * (x_B.ndim - 1))
  return jnp.sum(w * x_B, axis=0) / jnp.maximum(jnp.sum(w), 1.0)


def searchlight(model, tokens_BxL, labels_B, num_classes=2):
  """Where the last query looks, per class of first symbol.

  Returns, for each class c (axis 0): weights_CxL (the mean weight on every
  position, heads averaged), pos0_mass_C (mean weight on position 0),
  entropy_C (mean entropy of each string's weights) and accuracy_C.
  """
  logits_BxC, att_BxHxL = last_query_attention(model, tokens_BxL)
  att_BxL = att_BxHxL.mean(axis=1)
  correct_B = (jnp.argmax(logits_BxC, -1) == labels_B).astype(jnp.float32)
  per_class = []
  for c in range(num_classes):
    mask = labels_B == c
    per_class.append({
        'weights': class_mean(att_BxL, mask),
        'pos0_mass': class_mean(att_BxL[:, 0], mask),
        'entropy': class_mean(entropy(att_BxL), mask),
        'accuracy': class_mean(correct_B, mask),
    })
  return jax.tree.map(lambda *x: jnp.stack(x), *per_class)


def margin_gradient(model, tokens_BxL):
  """d margin / d x for every input vector x (token plus position embedding)
  of every string, margin = logit_A - logit_B: one backward pass. Returns
  (grad_BxLxD, (logits_BxC, aux)). The margin, unlike the loss, does not
  vanish once the task is learned."""
  x_BxLxD = model.embed(tokens_BxL)

  def total_margin(x_BxLxD):
    logits_BxC, aux = model.classify(x_BxLxD)
    # Strings are independent: the gradient of the sum is each one's own.
    return jnp.sum(logits_BxC[:, 0] - logits_BxC[:, 1]), (logits_BxC, aux)

  return jax.grad(total_margin, has_aux=True)(x_BxLxD)


def margin_sensitivity(model, tokens_BxL, labels_B):
  """How strongly the output margin logit_A - logit_B still feels the input
  vector (token plus position embedding) at position 0: ||d margin / d e_0||,
  mean over strings ('sensitivity').

  Raw norms depend on each model's embedding and logit scales, so beside it:
  the same norm at the last filler position L-2 ('sensitivity_last', the
  nearest position that carries nothing the answer needs) and their ratio
  ('relative_sensitivity' = sensitivity / sensitivity_last), which those
  scales cancel out of: above 1, position 0 reaches the output more strongly
  than the position next to it."""
  return _sensitivities(*margin_gradient(model, tokens_BxL), labels_B)


def _sensitivities(grad_BxLxD, outputs, labels_B):
  logits_BxC, aux = outputs
  norms_BxL = jnp.linalg.norm(grad_BxLxD, axis=-1)
  first, last = norms_BxL[:, 0].mean(), norms_BxL[:, -2].mean()
  out = {'sensitivity': first, 'sensitivity_last': last,
         'relative_sensitivity': first / jnp.maximum(last, 1e-30),
         'accuracy': (jnp.argmax(logits_BxC, -1) == labels_B).mean()}
  if 'attention' in aux:  # attention: the bridge's own coefficient
    out['pos0_mass'] = aux['attention'][-1][:, :, -1, 0].mean()
  return out


def scaled_norm(x, axis=-1):
  """||x|| along `axis` without squaring tiny values to 0: a float32
  component under ~1e-19 squares below the smallest normal number, so the
  plain norm of a gradient of 1e-25 reads 0. Scaled by the largest
  component, the norm stays exact down to float32's own floor."""
  scale = jnp.max(jnp.abs(x), axis=axis, keepdims=True)
  unit = x / jnp.where(scale > 0, scale, 1.0)
  return jnp.squeeze(scale, axis) * jnp.linalg.norm(unit, axis=axis)


def margin_profile(model, tokens_BxL, labels_B):
  """`margin_sensitivity`, and from the same backward pass the bridge along
  the whole string: ||d margin / d x_t|| at every position t, mean over
  strings ('profile', shape L; position 0 is 'sensitivity' again)."""
  grad_BxLxD, outputs = margin_gradient(model, tokens_BxL)
  return {**_sensitivities(grad_BxLxD, outputs, labels_B),
          'profile': scaled_norm(grad_BxLxD).mean(axis=0)}


def beam_ablation(model, tokens_BxL, labels_B, num_classes=2):
  """Is the beam on position 0 what the model uses? Accuracy per class of
  first symbol with position 0 removed from the read-out query's weights
  (renormalised over the rest: 'without_pos0'); as a control, with one
  filler position removed instead ('without_filler'; string b loses
  position 1 + (7919 b mod (L - 2)), a spread over the filler fixed by the
  string's index); and with the beam dimmed, position 0's weight capped at
  a uniform look, 1/L, the rest handed to the other keys ('pos0_capped'):
  a model whose answer survives that does not need the beam."""
  B, L = tokens_BxL.shape
  x_BxLxD = model.embed(tokens_BxL)
  keep_L = jnp.arange(L) != 0
  filler_B = 1 + (jnp.arange(B) * 7919) % (L - 2)
  keep_BxL = jnp.arange(L)[None, :] != filler_B[:, None]
  cap_L = jnp.ones(L).at[0].set(1 / L)
  out = {}
  for name, how in (('without_pos0', dict(read_out_key_mask=keep_L)),
                    ('without_filler', dict(read_out_key_mask=keep_BxL)),
                    ('pos0_capped', dict(read_out_key_cap=cap_L))):
    logits_BxC, _ = model.classify(x_BxLxD, **how)
    correct_B = (jnp.argmax(logits_BxC, -1) == labels_B).astype(jnp.float32)
    out[name] = jnp.stack([class_mean(correct_B, labels_B == c)
                           for c in range(num_classes)])
  return out


def searchlight_with_ablation(model, tokens_BxL, labels_B):
  """`searchlight` and `beam_ablation` on the same strings, one program."""
  return {**searchlight(model, tokens_BxL, labels_B),
          **beam_ablation(model, tokens_BxL, labels_B)}
