/*
 * route.h — the request handlers fcgi/ brings itself, for the composition root to add to the
 * worker's list (fcgi/handler.h) in their place.
 *
 *   route_endpoints  the host's own endpoints: ping_path, status_path, metrics_path (to
 *                    status_allow only); claims a request by its path
 *   route_chain      the tenancy chain and the app behind it; claims every request, so it
 *                    comes last
 *
 * Must not: be used outside a worker (they serve through the worker's state).
 */
#ifndef TN_FCGI_ROUTE_H
#define TN_FCGI_ROUTE_H

#include "tenancy/handler.h"

extern const tn_handler route_endpoints;
extern const tn_handler route_chain;

#endif
