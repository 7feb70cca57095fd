#include <stdio.h>

#include "fixture.h"

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        printf("arg: %s\n", argv[i]);
    }
    fixture_hello(TOOL_NAME);
    printf("\n"); /* llama-completion ends its answer with a blank line */
    return 0;
}
