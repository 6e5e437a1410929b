"""Print a tensor-level FIR function: a chain of N elementwise ops (argv[1], default 200)."""

import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
ops = ["exp", "neg", "sin", "tanh", "abs", "sigmoid"]
lines = ["func @chain(%x: f32[64, 32], %b: f32[32]) -> (f32[64, 32]) {"]
prev = "%x"
for k in range(n):
    name = f"%v{k}"
    if k % 4 == 3:
        lines.append(f"  {name} = add {prev}, %b : f32[64, 32]")
    elif k % 4 == 1:
        lines.append(f"  {name} = mul {prev}, 0.5 : f32[64, 32]")
    else:
        lines.append(f"  {name} = {ops[k % len(ops)]} {prev} : f32[64, 32]")
    prev = name
lines.append(f"  return {prev}")
lines.append("}")
print("\n".join(lines))
