#pragma once
// Umbrella header: everything a user of agx includes.

#include <agx/algorithm.hpp>
#include <agx/allgather.hpp>
#include <agx/allocate.hpp>
#include <agx/bytes.hpp>
#include <agx/encoded.hpp>
#include <agx/error.hpp>
#include <agx/fused.hpp>
#include <agx/options.hpp>
#include <agx/request.hpp>
