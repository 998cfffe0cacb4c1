"""totoc.compat.toto2 against toto-2 2.0.0, both called as a toto-2 user calls Toto2Model.forecast."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import TOTO2_CASES, case, context_sigma, within_golden_tolerance

PATCH = 32


def forecast_inputs(name: str, batch: int = 1):
    """toto-2's inputs for a fixture request, as a toto-2 user builds them: the context cut to a multiple of
    the patch (toto-2 needs one), missing points 0 with target_mask False; `batch` copies, each scaled."""
    c = case(TOTO2_CASES, name)
    req = c["request"]
    target = np.array([[np.nan if x is None else x for x in row] for row in req["target"]], dtype=np.float32)
    kept = (target.shape[-1] // PATCH) * PATCH
    target = target[:, -kept:]
    observed = ~np.isnan(target)
    ids = np.array(req.get("id_mask") or [0] * len(target))
    scales = np.arange(1, batch + 1, dtype=np.float32)[:, None, None]
    values = np.where(observed, target, 0)[None] * scales
    return c, {
        "target": torch.from_numpy(values),
        "target_mask": torch.from_numpy(np.broadcast_to(observed, values.shape).copy()),
        "series_ids": torch.from_numpy(np.broadcast_to(ids, (batch, len(ids))).copy()),
    }


# block_1v_long (blocks of 128 over several blocks) is left out: one engine per decode block would be built
@pytest.mark.parametrize("name", ["single_1v", "single_4v_groups", "block_3v", "block_short"])
def test_quantiles_match_toto2(toto2_model, toto2_engines, name):
    from totoc.compat.toto2 import Toto2Model

    c, inputs = forecast_inputs(name, batch=2)
    horizon = c["request"]["horizon"]
    block = c["options"]["decode_block"]
    # the engine that decodes as toto-2 does for this case: blocks of 64, else one pass (block_short's
    # horizon fits one block of 128: a single pass)
    engine = toto2_engines[64 if block == 64 else None]
    theirs = toto2_model.forecast(inputs, horizon, decode_block_size=block)
    ours = Toto2Model(engine).forecast(inputs, horizon, decode_block_size=block)
    assert ours.shape == theirs.shape == (9, 2, inputs["target"].shape[1], horizon)
    assert ours.dtype == theirs.dtype == torch.float32
    assert torch.all(ours[1:] >= ours[:-1]), "quantiles out of order"
    sigma = context_sigma(inputs["target"].numpy(), inputs["target_mask"].numpy())
    within_golden_tolerance(ours.numpy(), theirs.numpy(), np.broadcast_to(sigma, (9, *sigma.shape)), name)


def test_unbatched_and_numpy_inputs(toto2_model, toto2_engines):
    from totoc.compat.toto2 import Toto2Model

    c, inputs = forecast_inputs("single_4v_groups")
    one = {k: v[0] for k, v in inputs.items()}
    theirs = toto2_model.forecast(one, 40)
    ours = Toto2Model(toto2_engines[None]).forecast(one, 40)
    assert ours.shape == theirs.shape == (9, 4, 40)
    as_numpy = Toto2Model(toto2_engines[None]).forecast({k: v.numpy() for k, v in one.items()}, 40)
    assert isinstance(as_numpy, np.ndarray) and np.array_equal(as_numpy, ours.numpy())
    # the last patch is forced to observed, as toto-2 does: a masked point there counts with its value
    masked = dict(one, target_mask=one["target_mask"].clone())
    masked["target_mask"][:, -3:] = False
    theirs_masked = toto2_model.forecast(masked, 40)
    ours_masked = Toto2Model(toto2_engines[None]).forecast(masked, 40)
    sigma = context_sigma(one["target"].numpy()[None], one["target_mask"].numpy()[None])[0]
    within_golden_tolerance(ours_masked.numpy(), theirs_masked.numpy(), np.broadcast_to(sigma, (9, 4)), "masked tail")


def test_refused_options_name_the_problem(toto2_engines, toto1_engine):
    import totoc
    from totoc.compat.toto2 import Toto2Model

    _, inputs = forecast_inputs("single_1v")
    single, block = Toto2Model(toto2_engines[None]), Toto2Model(toto2_engines[64])
    with pytest.raises(totoc.InvalidInput, match="decode_block 64"):
        block.forecast(inputs, 200)  # toto-2 would run one pass; this engine decodes in blocks of 64
    with pytest.raises(totoc.InvalidInput, match="decode_block none"):
        single.forecast(inputs, 200, decode_block_size=64)
    with pytest.raises(totoc.InvalidInput, match="divisible"):
        single.forecast(inputs, 200, decode_block_size=40)
    single.forecast(inputs, 30, decode_block_size=64)  # one block: the same single pass
    with pytest.raises(totoc.InvalidInput, match="exogenous"):
        single.forecast(dict(inputs, known_dynamic=inputs["target"]), 8)
    with pytest.raises(totoc.InvalidInput, match="quantile_real_cap_k"):
        single.forecast(inputs, 8, quantile_real_cap_k=3.0)
    gappy = dict(inputs, target_mask=inputs["target_mask"].clone())
    gappy["target_mask"][..., :PATCH] = False
    with pytest.raises(totoc.InvalidInput, match="has_missing_values=False"):
        single.forecast(gappy, 8, has_missing_values=False)
    single.forecast(inputs, 8, has_missing_values=False)
    with pytest.raises(totoc.InvalidInput, match="toto-1.0"):
        Toto2Model(toto1_engine)
