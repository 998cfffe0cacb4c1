"""Drop-ins for the Python APIs of Datadog's own packages, over a totoc :class:`~totoc.Engine`.

* :mod:`totoc.compat.toto_ts`: toto-ts 0.2.0's ``TotoForecaster`` (Toto 1.0), ``MaskedTimeseries`` and
  ``Forecast``;
* :mod:`totoc.compat.toto2`: toto-2 2.0.0's ``Toto2Model.forecast`` (Toto 2.0);
* :mod:`totoc.compat.kronos`: Kronos's ``KronosPredictor`` (``predict``, ``predict_batch``; pandas DataFrames in
  and out).

A script moves to totoc by changing its imports and the line that builds the forecaster or model; everything
else (the inputs it builds, the results it reads) stays. The arguments the drop-ins ignore or refuse are listed
in each module's docs and in docs/formats.md ("Python API").

torch is optional (Kronos: it seeds the paths when installed): torch tensors in give torch tensors out, on the inputs' device and in their dtype; numpy
arrays in give numpy arrays out.
"""
