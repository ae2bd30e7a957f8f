module lionet.local/reference/gobench

go 1.19
