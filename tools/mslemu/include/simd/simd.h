// Forwarding header: the whole MSL shim lives in metal_stdlib.
#pragma once
#include <metal_stdlib>
