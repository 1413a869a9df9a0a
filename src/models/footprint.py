"""What a model keeps, per string, as formulas of (L, D, H, layers): the
float32 values a training step keeps for its backward pass (the memory
check before anything runs: `ModelSpec.activations`), and the floats it
carries from one position to the next when it generates
(`ModelSpec.state_floats`, which `recall` compares).
"""

from src.models import attention
from src.models import linear_attention
from src.models import mamba


def attention_activations(L, D, H, layers):
  # Every layer's projections and residual stream; the lower layers also keep
  # an L x L grid per head (the last computes one query row).
  return layers * 8 * L * D + (layers - 1) * 2 * H * L * L + 2 * H * L


def kv_cache(L, D, H, layers):
  # Every layer's keys and values at every position so far.
  return layers * 2 * L * D


def transformer_activations(L, D, H, layers):
  # Attention's, and per layer two norms (their inputs and outputs), the
  # MLP's hidden layer before and after GELU (4D each) and its output.
  return (attention_activations(L, D, H, layers)
          + layers * (4 + 2 * attention.MLP_RATIO + 1) * L * D)


def recurrent_activations(gates):
  # Per position: the gate pre-activations and activations, the states.
  return lambda L, D, H, layers: L * (3 * gates * D + 3 * D)


def lstm_state(L, D, H, layers):
  return 2 * D  # h and c


def hidden_state(L, D, H, layers):
  return D  # h


# The three below are fitted to XLA's memory analysis of a training step on
# the CPU (d_model 32, L 50 and 200, one and two layers): within ~15%.

def linear_attention_activations(L, D, H, layers):
  # Training takes the chunked form: every layer's projections, features,
  # norms and residual stream, its C x C grids per head and chunk, and each
  # chunk's running sums (H K x K per chunk).
  C = linear_attention.LINEAR_ATTENTION_CHUNK
  return layers * (12 * L * D + 4 * H * L * C + 2 * L * D * D // (H * C))


def lru_activations(L, D, H, layers):
  # Per layer: the norm, the complex inputs and states (two floats each, and
  # the scan's levels), the read-out, GELU and the GLU.
  return layers * 24 * L * D


def mamba_activations(L, D, H, layers):
  # Per layer: the (L, E*D) projections, convolution, Delta and gate; in
  # sequence (a CPU) the (E*D, N) state entering each chunk, all the chunked
  # scan keeps of its states (it recomputes a chunk's in the backward pass);
  # in parallel (an accelerator) about 12 (L, N, E*D) tensors: the decays,
  # inputs and states and the associative scan's levels (XLA's memory
  # analysis of the parallel form compiled for the CPU, L 50 and 200: 11-12).
  I, N = mamba.MAMBA_EXPAND * D, mamba.MAMBA_STATE
  states = (12 * L if mamba.parallel_scan()
            else L // mamba.scan_chunk() + 1)
  return layers * (12 * L * I + states * I * N)


def linear_attention_state(L, D, H, layers):
  # Per layer and head the running sums S = sum phi(k) v^T (K x K) and
  # z = sum phi(k) (K).
  K = D // H
  return layers * H * (K * K + K)


def lru_state(L, D, H, layers):
  return layers * 2 * D  # D complex units, two floats each


def mamba_state(L, D, H, layers):
  # Per layer: N states per inner channel, and the convolution's window of
  # the last W - 1 inputs.
  I = mamba.MAMBA_EXPAND * D
  return layers * I * (mamba.MAMBA_STATE + mamba.MAMBA_CONV - 1)
