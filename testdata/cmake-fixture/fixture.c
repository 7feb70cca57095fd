#include <stdio.h>

#include "fixture.h"

void fixture_hello(const char *tool) {
    printf("lib: libfixture loaded by %s\n", tool);
}
