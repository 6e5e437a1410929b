#!/bin/sh
# Re-create the imported examples from models.py (run from anywhere; needs `pip install -e .`).
# The tests read the fir-import lines below to rebuild each program's inputs and parameters.
set -e
cd "$(dirname "$0")"
fir-import models.py:rms_norm --input 'f32[8,64]' --input 'f32[64]' -o rms_norm.fir
fir-import models.py:softmax --input 'f32[8,64]' -o softmax.fir
fir-import models.py:layer_norm --input 'f32[8,64]' --input 'f32[64]' --input 'f32[64]' -o layer_norm.fir
fir-import models.py:GeluMLP --name gelu_mlp --input 'f32[8,64]' -o gelu_mlp.fir
fir-import models.py:cross_entropy --input 'f32[8,16]' --input 'i64[8]' -o cross_entropy.fir
fir-import models.py:transformer_encoder_layer --input 'f32[2,8,64]' -o transformer_encoder_layer.fir
