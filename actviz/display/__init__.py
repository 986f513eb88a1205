"""From a capture to what is shown: the one preparation path (no Qt).

Read in this order:

* :mod:`~actviz.display.prepare` -- :func:`~actviz.display.prepare.prepare`, the entry point
  used by single runs, live frames, pins and export; :func:`~actviz.display.repage.with_page`
  and :func:`~actviz.display.repage.renormalised` make new results for page turns and
  normalisation changes;
* :mod:`~actviz.display.layer_views` -- one sample of a layer shaped as maps, bars or a heat map;
* :mod:`~actviz.display.mosaic` -- channel mosaics: paging, downsampling, **normalisation**;
* :mod:`~actviz.display.colormaps` -- the one colour registry and the index images painted;
* :mod:`~actviz.display.stats` -- statistics and histograms (exact or fast);
* :mod:`~actviz.display.attribution` -- the input picture, saliency, Grad-CAM (and the rule for
  its default layer), predictions;
* :mod:`~actviz.display.device` -- one host copy per frame for records on a GPU;
* :mod:`~actviz.display.difference` -- two runs: run A minus run B as prepared layers
  (symmetric mosaics, a diverging map) and the change of the predictions;
* :mod:`~actviz.display.token_maps` -- token sequences (token x feature views) and ViT patch tokens
  on their grid (the rule that recognises them: :func:`~actviz.display.token_maps.sequence_kind`);
* :mod:`~actviz.display.attention` -- attention probabilities per head (the model's own, from
  its unfused path) and attention rollout;
* :mod:`~actviz.display.logit_lens` -- each block of a decoder LM read out as tokens;
* :mod:`~actviz.display.prepared` -- the frozen :class:`~actviz.display.prepared.RunResult` and
  :class:`~actviz.display.prepared.PreparedLayer`.

Imports point one way: ``ui -> io -> display -> core``.
"""
