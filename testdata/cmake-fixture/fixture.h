#ifndef GUARD_FIXTURE_H
#define GUARD_FIXTURE_H

void fixture_hello(const char *tool);

#endif
