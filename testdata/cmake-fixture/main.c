#include <stdio.h>

#include "fixture.h"

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        printf("arg: %s\n", argv[i]);
    }
    fixture_hello(TOOL_NAME);
    return 0;
}
