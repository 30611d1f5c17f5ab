module sancus

go 1.26.8
