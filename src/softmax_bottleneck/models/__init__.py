"""The model: AWD-LSTM (Merity et al. 2018) with its regularisers and an exchangeable output layer.

``awd_lstm`` assembles embedding → 3 LSTMs → output layer (tied weights); ``weight_drop`` is DropConnect on
the recurrent weights; ``regularization`` holds embedding dropout, locked dropout and embedding noise;
``output_layers`` holds the output layers the study compares (paper §3) and their registry.
"""
