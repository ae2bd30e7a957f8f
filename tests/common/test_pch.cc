// Compiled only so that target lionet_test_pch builds tests/common/test_pch.h once for every test program.
