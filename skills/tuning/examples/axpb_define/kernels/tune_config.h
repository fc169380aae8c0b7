// Written by the tuner (agent tune): the values of kernels/tune.json's parameters.
#pragma once
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 1
#endif
