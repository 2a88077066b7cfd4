/*
 * rc.h — the project's return-code vocabulary.
 *
 * The codes are defined once, in the public app header (include/tenancy.h), because apps
 * receive and return them too; every module includes this file rather than the app header
 * so that the dependency reads as "core vocabulary". Owns nothing else.
 */
#ifndef TN_CORE_RC_H
#define TN_CORE_RC_H

#include "tenancy.h"

#endif
