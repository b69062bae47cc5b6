/* The harness's own check: test 3 expects a wrong value, so this program must exit 3. */
#include "test.h"
CODE_BEGIN
    TEST_RR(1, add, 3, 1, 2)
    TEST_RR(2, sub, 1, 3, 2)
    TEST_RR(3, add, 5, 2, 2)
    TEST_RR(4, add, 4, 2, 2)
CODE_END
